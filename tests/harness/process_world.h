// ProcessWorld: runs N ranks as real processes (fork, no exec) that rendezvous through the
// real TCP store and talk over real sockets. Each rank's output goes to its own file; a rank
// reports failures as text back to the parent, which checks them with GoogleTest.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace collie {
namespace testing {

// What a rank writes back: failures (the test fails if any) and free-form notes.
class Reporter {
 public:
  explicit Reporter(int fd) : fd_(fd) {}
  void fail(const std::string& what);
  void note(const std::string& what);
  int failures() const { return failures_; }

 private:
  void send(char kind, const std::string& what);
  int fd_;
  int failures_ = 0;
};

struct RankOutcome {
  int rank = -1;
  int exitCode = -1;   // exit status, or 128 + signal
  bool signaled = false;
  std::vector<std::string> failures;
  std::vector<std::string> notes;
  std::string output;  // stdout and stderr of the rank
};

struct WorldOptions {
  int timeoutSec = 300;  // the whole world is killed after this (a hang is a failure)
  std::vector<std::pair<std::string, std::string>> env;  // set in every rank
  bool setRankEnv = true;  // RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT for collieCommInitFromEnv
};

// Runs body(rank, reporter) in n forked processes and waits for all of them. The caller must
// be single-threaded (fork copies only the calling thread).
std::vector<RankOutcome> runWorld(int n, const WorldOptions& opt,
                                  const std::function<void(int rank, Reporter& rep)>& body);

// A TCP port that was free a moment ago on 127.0.0.1.
int freePort();

// Expects every rank to exit 0 without failures; prints what went wrong otherwise.
void expectAllPassed(const std::vector<RankOutcome>& out);

}  // namespace testing
}  // namespace collie
