// The test helpers: temp folders, IDX writing with zlib, synthetic data, fork/exec with output
// files and a deadline on every wait.
#include "tests/training/train_test_util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"
#include "training_demo/checkpoint.h"
#include "training_demo/rng.h"

namespace collie {
namespace train {
namespace testing {

TempDir::TempDir() {
  const char* base = getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/collie-train-test-XXXXXX";
  char* p = mkdtemp(&tmpl[0]);
  EXPECT_NE(p, nullptr) << "mkdtemp " << tmpl;
  path_ = tmpl;
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  const std::string cmd = "rm -rf '" + path_ + "'";
  if (system(cmd.c_str()) != 0) fprintf(stderr, "could not remove %s\n", path_.c_str());
}

void writeIdx(const std::string& path, const std::vector<uint32_t>& dims,
              const std::vector<uint8_t>& data, bool gz) {
  std::vector<uint8_t> bytes{0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(static_cast<uint8_t>(d >> s));
  }
  bytes.insert(bytes.end(), data.begin(), data.end());
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr) << path;
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    ASSERT_EQ(gzclose(f), Z_OK);
  } else {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    ASSERT_TRUE(out.good()) << path;
  }
}

void writeSyntheticData(const std::string& dir, uint32_t trainCount, uint32_t testCount,
                        uint32_t side, uint64_t seed) {
  Rng rng(seed);
  const uint32_t pixels = side * side;
  std::vector<uint8_t> prototypes(10 * pixels);
  for (uint8_t& p : prototypes) p = static_cast<uint8_t>(rng.below(256));
  auto split = [&](const std::string& prefix, uint32_t count) {
    std::vector<uint8_t> images(static_cast<size_t>(count) * pixels), labels(count);
    for (uint32_t i = 0; i < count; ++i) {
      labels[i] = static_cast<uint8_t>(rng.below(10));
      for (uint32_t p = 0; p < pixels; ++p) {
        const int v = prototypes[labels[i] * pixels + p] / 3 + static_cast<int>(rng.below(170));
        images[static_cast<size_t>(i) * pixels + p] = static_cast<uint8_t>(v);
      }
    }
    writeIdx(dir + "/" + prefix + "-images-idx3-ubyte.gz", {count, side, side}, images, true);
    writeIdx(dir + "/" + prefix + "-labels-idx1-ubyte.gz", {count}, labels, true);
  };
  split("train", trainCount);
  split("t10k", testCount);
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Child spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            const std::string& outPath, const std::string& errPath) {
  Child c;
  c.outPath = outPath;
  c.errPath = errPath;
  c.pid = fork();
  if (c.pid == 0) {
    const int out = open(outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0) _exit(125);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    for (const std::string& kv : env) putenv(const_cast<char*>(kv.c_str()));
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(126);
  }
  EXPECT_GT(c.pid, 0) << "fork";
  return c;
}

int waitChild(const Child& c, double timeoutSec) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSec);
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(c.pid, &status, WNOHANG);
    if (r == c.pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(c.pid, SIGKILL);
      waitpid(c.pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

RunResult runProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                     double timeoutSec) {
  TempDir logs;
  Child c = spawn(argv, env, logs.file("out"), logs.file("err"));
  RunResult r;
  r.code = waitChild(c, timeoutSec);
  r.out = readFile(c.outPath);
  r.err = readFile(c.errPath);
  return r;
}

void loadParams(const std::string& dir, std::vector<float>* params, std::vector<float>* velocity) {
  TrainState s;
  const Status st = loadCheckpoint(checkpointPath(dir), &s);
  ASSERT_TRUE(st.ok()) << st.message();
  *params = s.params;
  if (velocity) *velocity = s.velocity;
}

double relativeDistance(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(a[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

}  // namespace testing
}  // namespace train
}  // namespace collie
