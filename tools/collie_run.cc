// collie-run: the launcher. Starts N ranks of a program on this node, one node of a job of
// --nnodes nodes, with the rendezvous environment (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), optionally relays their output tagged with the
// rank, and tears this node's ranks down when one fails, when the launcher receives a signal, or
// when a timeout expires. Plain POSIX (Linux for prctl); it uses nothing of the library so that
// it can launch any program.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tools/collie_run_options.h"

namespace collie {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kSystemError = 1;
constexpr int kExecFailed = 127;
constexpr int kTimeoutExit = 124;
// Time a rank gets to exit after SIGTERM before it is sent SIGKILL.
constexpr auto kKillGrace = std::chrono::seconds(3);
// A SIGKILLed process normally vanishes at once; one stuck in the kernel must not hold the
// launcher forever.
constexpr auto kReapLimit = std::chrono::seconds(10);
// Output still arriving after the last rank was reaped comes from a process that inherited the
// rank's pipe (a daemon, say); it must not keep the launcher alive.
constexpr auto kDrainLimit = std::chrono::milliseconds(500);
// A line longer than this is relayed in pieces, so one rank cannot make the launcher buffer
// without bound.
constexpr size_t kMaxLine = 64 * 1024;
constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP};

void writeAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the reader went away; the ranks must keep running regardless
    done += static_cast<size_t>(n);
  }
}

// One whole line per write, so the launcher's messages never split a rank's tagged line.
void say(const std::string& msg) { writeAll(STDERR_FILENO, "collie-run: " + msg + "\n"); }

// The port is free when picked; the ranks bind it moments later, the usual launcher race.
int pickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// Self-pipe: the handler only writes the signal number; the poll loop does the work.
int gWakeWrite = -1;

void onSignal(int signo) {
  int saved = errno;
  char byte = static_cast<char>(signo);
  // A full pipe already holds a wakeup; signals do not queue anyway.
  ssize_t ignored = write(gWakeWrite, &byte, 1);
  (void)ignored;
  errno = saved;
}

sigset_t handledSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kForwardedSignals) sigaddset(&set, s);
  sigaddset(&set, SIGCHLD);
  return set;
}

std::string describeSignal(int signo) {
  const char* name = strsignal(signo);
  return "signal " + std::to_string(signo) + (name ? std::string(" (") + name + ")" : "");
}

// Output of one rank on one stream, reassembled into whole lines.
struct Stream {
  int fd = -1;
  int dest = -1;
  std::string partial;
};

struct Rank {
  pid_t pid = -1;
  bool alive = false;
  Stream out, err;
};

class Launcher {
 public:
  Launcher(const RunOptions& opt, int wake_read) : opt_(opt), wake_read_(wake_read) {}
  int run(int port);

 private:
  bool spawn(int rank, int port);
  [[noreturn]] void execRank(int rank, int port, pid_t parent, int out_w, int err_w);
  void handleWakeup();
  void reap();
  void onRankExit(int rank, int status);
  void pump(int rank, Stream* s);
  void emit(int rank, Stream* s, size_t len, bool add_newline);
  void closeStream(int rank, Stream* s);
  void beginTermination(int signo, int exit_code);
  void signalAll(int signo);
  void checkDeadlines(Clock::time_point now);
  int pollTimeoutMs(Clock::time_point now) const;
  bool streamsOpen() const;

  const RunOptions& opt_;
  int wake_read_;
  std::vector<Rank> ranks_;
  int alive_ = 0;
  int exit_code_ = 0;
  int signals_received_ = 0;
  bool terminating_ = false;
  bool killed_ = false;
  Clock::time_point timeout_at_ = Clock::time_point::max();
  Clock::time_point kill_at_ = Clock::time_point::max();
  Clock::time_point give_up_at_ = Clock::time_point::max();
  Clock::time_point drain_until_ = Clock::time_point::max();
};

void Launcher::execRank(int rank, int port, pid_t parent, int out_w, int err_w) {
  // Ranks must not outlive a launcher that is SIGKILLed; the check catches a launcher that died
  // before prctl took effect.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(kSystemError);
  // Dispositions the program expects: execvp keeps ignored signals ignored and the mask as is.
  for (int s : kForwardedSignals) signal(s, SIG_DFL);
  signal(SIGCHLD, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (opt_.tag_output) {
    dup2(out_w, STDOUT_FILENO);
    dup2(err_w, STDERR_FILENO);
  }
  // As with mpirun, only rank 0 reads the launcher's stdin; N readers of a terminal would race.
  if (rank > 0) {
    int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
  }
  std::string r = std::to_string(opt_.globalRank(rank));
  setenv("RANK", r.c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(opt_.worldSize()).c_str(), 1);
  setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  setenv("LOCAL_WORLD_SIZE", std::to_string(opt_.nranks).c_str(), 1);
  // torchrun's names for the node index and count, for programs written against it.
  setenv("GROUP_RANK", std::to_string(opt_.node_rank).c_str(), 1);
  setenv("GROUP_WORLD_SIZE", std::to_string(opt_.nnodes).c_str(), 1);
  setenv("MASTER_ADDR", opt_.master_addr.empty() ? "127.0.0.1" : opt_.master_addr.c_str(), 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  execvp(opt_.argv[0], opt_.argv.data());
  int e = errno;
  writeAll(STDERR_FILENO, "collie-run: rank " + r + ": cannot execute '" + opt_.argv[0] +
                              "': " + std::strerror(e) + "\n");
  _exit(kExecFailed);
}

bool Launcher::spawn(int rank, int port) {
  int out_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};
  // Close-on-exec keeps each rank from holding the other ranks' pipes open.
  if (opt_.tag_output && (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0)) {
    say("cannot create a pipe for rank " + std::to_string(opt_.globalRank(rank)) + ": " +
        std::strerror(errno));
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) {
      if (fd >= 0) close(fd);
    }
    return false;
  }
  // Blocked across fork so that the child cannot run the launcher's handler before it resets it.
  sigset_t handled = handledSignals();
  sigset_t old;
  sigprocmask(SIG_BLOCK, &handled, &old);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) execRank(rank, port, parent, out_pipe[1], err_pipe[1]);
  int fork_errno = errno;
  sigprocmask(SIG_SETMASK, &old, nullptr);
  Rank& rk = ranks_[rank];
  if (opt_.tag_output) {
    close(out_pipe[1]);
    close(err_pipe[1]);
    rk.out = {out_pipe[0], STDOUT_FILENO, {}};
    rk.err = {err_pipe[0], STDERR_FILENO, {}};
    fcntl(rk.out.fd, F_SETFL, O_NONBLOCK);
    fcntl(rk.err.fd, F_SETFL, O_NONBLOCK);
  }
  if (pid < 0) {
    say("cannot start rank " + std::to_string(opt_.globalRank(rank)) +
        ": fork: " + std::strerror(fork_errno));
    closeStream(rank, &rk.out);
    closeStream(rank, &rk.err);
    return false;
  }
  rk.pid = pid;
  rk.alive = true;
  ++alive_;
  return true;
}

void Launcher::signalAll(int signo) {
  for (Rank& rk : ranks_) {
    if (rk.alive) kill(rk.pid, signo);
  }
}

void Launcher::beginTermination(int signo, int exit_code) {
  if (!terminating_) {
    terminating_ = true;
    exit_code_ = exit_code;
    kill_at_ = Clock::now() + kKillGrace;
  }
  signalAll(signo);
}

void Launcher::onRankExit(int rank, int status) {
  Rank& rk = ranks_[rank];
  rk.alive = false;
  --alive_;
  if (alive_ == 0) drain_until_ = Clock::now() + kDrainLimit;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  // Ranks that die of the launcher's own SIGTERM are not news; the first failure is.
  if (code == 0 || terminating_) return;
  std::string what = WIFEXITED(status) ? "exited with status " + std::to_string(code)
                                       : "was killed by " + describeSignal(WTERMSIG(status));
  say("rank " + std::to_string(opt_.globalRank(rank)) + " (pid " + std::to_string(rk.pid) + ") " +
      what + (alive_ > 0 ? "; terminating the other ranks" : ""));
  beginTermination(SIGTERM, code);
}

void Launcher::reap() {
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (ranks_[r].alive && ranks_[r].pid == pid) onRankExit(static_cast<int>(r), status);
    }
  }
}

void Launcher::handleWakeup() {
  char buf[64];
  ssize_t n;
  while ((n = read(wake_read_, buf, sizeof(buf))) > 0) {
    for (ssize_t i = 0; i < n; ++i) {
      int signo = static_cast<unsigned char>(buf[i]);
      if (signo == SIGCHLD) continue;
      ++signals_received_;
      if (signals_received_ == 1) {
        say("received " + describeSignal(signo) + "; forwarding it to the ranks");
      }
      beginTermination(signo, 128 + signo);
      // A second signal means the user will not wait for a graceful exit.
      if (signals_received_ > 1) kill_at_ = Clock::now();
    }
  }
  reap();
}

void Launcher::emit(int rank, Stream* s, size_t len, bool add_newline) {
  std::string line = "[" + std::to_string(opt_.globalRank(rank)) + "] ";
  line.append(s->partial, 0, len);
  if (add_newline) line += '\n';
  writeAll(s->dest, line);
  s->partial.erase(0, len);
}

void Launcher::closeStream(int rank, Stream* s) {
  if (s->fd < 0) return;
  if (!s->partial.empty()) emit(rank, s, s->partial.size(), true);
  close(s->fd);
  s->fd = -1;
}

void Launcher::pump(int rank, Stream* s) {
  char buf[16384];
  ssize_t n = read(s->fd, buf, sizeof(buf));
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    closeStream(rank, s);
    return;
  }
  s->partial.append(buf, static_cast<size_t>(n));
  size_t nl;
  while ((nl = s->partial.find('\n')) != std::string::npos) emit(rank, s, nl + 1, false);
  if (s->partial.size() >= kMaxLine) emit(rank, s, s->partial.size(), true);
}

void Launcher::checkDeadlines(Clock::time_point now) {
  if (!terminating_ && now >= timeout_at_) {
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%g", opt_.timeout_s);
    say(std::string("timeout of ") + secs + " s reached; terminating the ranks");
    beginTermination(SIGTERM, kTimeoutExit);
  }
  if (terminating_ && !killed_ && alive_ > 0 && now >= kill_at_) {
    killed_ = true;
    give_up_at_ = now + kReapLimit;
    say("sending SIGKILL to " + std::to_string(alive_) + " rank(s) still running");
    signalAll(SIGKILL);
  }
}

int Launcher::pollTimeoutMs(Clock::time_point now) const {
  Clock::time_point next = Clock::time_point::max();
  if (!terminating_) next = std::min(next, timeout_at_);
  if (terminating_ && !killed_ && alive_ > 0) next = std::min(next, kill_at_);
  if (killed_ && alive_ > 0) next = std::min(next, give_up_at_);
  if (alive_ == 0) next = std::min(next, drain_until_);
  if (next == Clock::time_point::max()) return -1;  // only a signal or output can change things
  if (next <= now) return 0;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1;
  return static_cast<int>(std::min<long long>(ms, 1 << 30));
}

bool Launcher::streamsOpen() const {
  for (const Rank& rk : ranks_) {
    if (rk.out.fd >= 0 || rk.err.fd >= 0) return true;
  }
  return false;
}

int Launcher::run(int port) {
  ranks_.resize(static_cast<size_t>(opt_.nranks));
  if (opt_.timeout_s > 0) {
    timeout_at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(opt_.timeout_s));
  }
  for (int r = 0; r < opt_.nranks && !terminating_; ++r) {
    if (!spawn(r, port)) beginTermination(SIGTERM, kSystemError);
  }
  if (alive_ == 0) drain_until_ = Clock::now();
  std::vector<pollfd> fds;
  std::vector<std::pair<int, Stream*>> owners;
  for (;;) {
    Clock::time_point now = Clock::now();
    checkDeadlines(now);
    if (alive_ == 0 && (!streamsOpen() || now >= drain_until_)) break;
    if (killed_ && alive_ > 0 && now >= give_up_at_) {
      say(std::to_string(alive_) + " rank(s) still alive after SIGKILL; giving up on them");
      break;
    }
    fds.assign(1, pollfd{wake_read_, POLLIN, 0});
    owners.clear();
    for (size_t r = 0; r < ranks_.size(); ++r) {
      for (Stream* s : {&ranks_[r].out, &ranks_[r].err}) {
        if (s->fd < 0) continue;
        fds.push_back(pollfd{s->fd, POLLIN, 0});
        owners.emplace_back(static_cast<int>(r), s);
      }
    }
    int ready = poll(fds.data(), fds.size(), pollTimeoutMs(now));
    if (ready < 0 && errno != EINTR) {
      say(std::string("poll: ") + std::strerror(errno));
      beginTermination(SIGKILL, kSystemError);
      break;
    }
    if (ready <= 0) continue;
    if (fds[0].revents != 0) handleWakeup();
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) pump(owners[i - 1].first, owners[i - 1].second);
    }
  }
  for (size_t r = 0; r < ranks_.size(); ++r) {
    closeStream(static_cast<int>(r), &ranks_[r].out);
    closeStream(static_cast<int>(r), &ranks_[r].err);
  }
  return exit_code_;
}

int installSignalHandlers(int* wake_read) {
  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
  *wake_read = wake[0];
  gWakeWrite = wake[1];
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  for (int s : kForwardedSignals) sigaction(s, &sa, nullptr);
  sigaction(SIGCHLD, &sa, nullptr);
  // A closed stdout must not kill the launcher while it still looks after the ranks.
  signal(SIGPIPE, SIG_IGN);
  return 0;
}

}  // namespace
}  // namespace collie

int main(int argc, char** argv) {
  collie::RunOptions opt;
  int rc = collie::parseRunArgs(argc, argv, &opt);
  if (rc >= 0) return rc;
  // Across nodes every node must name the same port without talking first: torchrun's default.
  int port = opt.port != 0    ? opt.port
             : opt.nnodes > 1 ? collie::kRunDefaultMasterPort
                              : collie::pickFreePort();
  if (port <= 0) {
    collie::say(std::string("cannot find a free TCP port on 127.0.0.1: ") + std::strerror(errno));
    return collie::kSystemError;
  }
  int wake_read = -1;
  if (collie::installSignalHandlers(&wake_read) != 0) {
    collie::say(std::string("cannot create the signal pipe: ") + std::strerror(errno));
    return collie::kSystemError;
  }
  collie::Launcher launcher(opt, wake_read);
  return launcher.run(port);
}
