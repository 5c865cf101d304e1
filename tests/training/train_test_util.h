// Helpers shared by the training demo's tests: temporary folders, IDX files and a small
// learnable synthetic data set written on the fly, and child processes with deadlines.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace collie {
namespace train {
namespace testing {

// A fresh folder under $TMPDIR (or /tmp), removed with its contents by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Writes an IDX file of unsigned bytes (gzip'd when gz).
void writeIdx(const std::string& path, const std::vector<uint32_t>& dims,
              const std::vector<uint8_t>& data, bool gz);

// Writes train-* and t10k-* IDX files of side x side images in ten classes: each class is a
// fixed random pattern plus noise, so a small MLP learns it in a few steps.
void writeSyntheticData(const std::string& dir, uint32_t trainCount, uint32_t testCount,
                        uint32_t side = 8, uint64_t seed = 7);

std::string readFile(const std::string& path);

// A child process: started with extra environment, output into files.
struct Child {
  pid_t pid = -1;
  std::string outPath, errPath;
};
Child spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            const std::string& outPath, const std::string& errPath);
// Waits up to timeoutSec; returns the exit code, 128 + signal, or -1 if it had to be killed.
int waitChild(const Child& c, double timeoutSec);

struct RunResult {
  int code = -1;
  std::string out, err;
};
// Runs argv to completion (killed after timeoutSec) and returns its status and output.
RunResult runProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                     double timeoutSec);

// The parameters (and momentum) saved in dir/checkpoint.bin; fails the test if unreadable.
void loadParams(const std::string& dir, std::vector<float>* params,
                std::vector<float>* velocity = nullptr);

// max |a - b| / max |a|: the relative distance of two parameter vectors.
double relativeDistance(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace testing
}  // namespace train
}  // namespace collie
