// ProcessWorld implementation: fork, per-rank output files, a report pipe per rank, a deadline.
#include "tests/harness/process_world.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "src/base/log.h"

namespace collie {
namespace testing {

void Reporter::send(char kind, const std::string& what) {
  std::string line(1, kind);
  for (char c : what) line += (c == '\n' ? ' ' : c);
  line += '\n';
  size_t off = 0;
  while (off < line.size()) {
    ssize_t w = write(fd_, line.data() + off, line.size() - off);
    if (w <= 0) return;
    off += static_cast<size_t>(w);
  }
}

void Reporter::fail(const std::string& what) {
  ++failures_;
  if (failures_ <= 20) send('F', what);
}

void Reporter::note(const std::string& what) { send('N', what); }

int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t l = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &l);
  int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

static std::string readFile(const std::string& path) {
  std::string s;
  FILE* f = fopen(path.c_str(), "r");
  if (!f) return s;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) s.append(buf, n);
  fclose(f);
  return s;
}

std::vector<RankOutcome> runWorld(int n, const WorldOptions& opt,
                                  const std::function<void(int, Reporter&)>& body) {
  fflush(stdout);
  fflush(stderr);
  int port = freePort();
  std::vector<pid_t> pids(n, -1), childPids;
  std::vector<int> pipes(n, -1);
  std::vector<std::string> logs(n);
  char dir[] = "/tmp/collie-world-XXXXXX";
  if (mkdtemp(dir) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed";
    return {};
  }
  for (int r = 0; r < n; ++r) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) abort();
    logs[r] = std::string(dir) + "/rank" + std::to_string(r) + ".log";
    pid_t pid = fork();
    if (pid == 0) {
      close(p[0]);
      int out = open(logs[r].c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      dup2(out, 1);
      dup2(out, 2);
      close(out);
      setpgid(0, 0);
      if (opt.setRankEnv) {
        setenv("RANK", std::to_string(r).c_str(), 1);
        setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      }
      for (const auto& kv : opt.env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
      logReload();  // the parent may have logged already, with its own settings
      Reporter rep(p[1]);
      body(r, rep);
      fflush(stdout);
      fflush(stderr);
      _exit(rep.failures() ? 1 : 0);
    }
    close(p[1]);
    pids[r] = pid;
    childPids.push_back(pid);
    pipes[r] = p[0];
  }
  std::vector<RankOutcome> out(n);
  std::vector<std::string> bufs(n);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(opt.timeoutSec);
  int open = n, alive = n;
  bool timedOut = false;
  while (open > 0 || alive > 0) {
    std::vector<pollfd> pf;
    std::vector<int> idx;
    for (int r = 0; r < n; ++r)
      if (pipes[r] >= 0) pf.push_back({pipes[r], POLLIN, 0}), idx.push_back(r);
    if (!pf.empty()) poll(pf.data(), pf.size(), 100);
    else std::this_thread::sleep_for(std::chrono::milliseconds(10));
    for (size_t i = 0; i < pf.size(); ++i) {
      if (!(pf[i].revents & (POLLIN | POLLHUP))) continue;
      int r = idx[i];
      char buf[4096];
      ssize_t got = read(pipes[r], buf, sizeof(buf));
      if (got > 0) {
        bufs[r].append(buf, static_cast<size_t>(got));
      } else {
        close(pipes[r]);
        pipes[r] = -1;
        --open;
      }
    }
    for (int r = 0; r < n; ++r) {
      if (pids[r] <= 0) continue;
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        out[r].signaled = WIFSIGNALED(st);
        out[r].exitCode = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        pids[r] = -1;
        --alive;
      }
    }
    if (!timedOut && std::chrono::steady_clock::now() > deadline) {
      timedOut = true;
      ADD_FAILURE() << "world of " << n << " ranks still running after " << opt.timeoutSec
                    << " s: killed (a hang)";
      for (int r = 0; r < n; ++r)
        if (pids[r] > 0) kill(-pids[r], SIGKILL), kill(pids[r], SIGKILL);
    }
  }
  // No shared-memory segment of these ranks may outlive them (names end in -<pid>).
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.rfind("collie-", 0) != 0) continue;
      for (pid_t pid : childPids)
        if (name.size() > std::to_string(pid).size() &&
            name.compare(name.size() - std::to_string(pid).size() - 1, std::string::npos,
                         "-" + std::to_string(pid)) == 0)
          ADD_FAILURE() << "shared-memory segment /dev/shm/" << name << " left behind";
    }
    closedir(d);
  }
  for (int r = 0; r < n; ++r) {
    out[r].rank = r;
    size_t pos = 0;
    while (pos < bufs[r].size()) {
      size_t e = bufs[r].find('\n', pos);
      if (e == std::string::npos) e = bufs[r].size();
      std::string line = bufs[r].substr(pos, e - pos);
      if (!line.empty() && line[0] == 'F') out[r].failures.push_back(line.substr(1));
      if (!line.empty() && line[0] == 'N') out[r].notes.push_back(line.substr(1));
      pos = e + 1;
    }
    out[r].output = readFile(logs[r]);
    unlink(logs[r].c_str());
  }
  rmdir(dir);
  return out;
}

void expectAllPassed(const std::vector<RankOutcome>& out) {
  for (const auto& o : out) {
    EXPECT_EQ(o.exitCode, 0) << "rank " << o.rank << " exited with " << o.exitCode
                             << "; its output:\n" << o.output.substr(0, 4000);
    for (const auto& f : o.failures) ADD_FAILURE() << "rank " << o.rank << ": " << f;
  }
}

}  // namespace testing
}  // namespace collie
