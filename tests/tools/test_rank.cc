// collie-test-rank: a rank program for the collie-run tests. It prints its environment, exits or
// dies on request, sleeps, or writes lines in pieces, and records its pid so that the tests can
// check that no rank outlives the launcher.
//
//   env                 print RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT
//   exit-rank R CODE    rank R exits with CODE once every rank is up; the others sleep 30 s
//   kill-rank R         rank R raises SIGKILL once every rank is up; the others sleep 30 s
//   sleep S             sleep S seconds, then exit 0
//   ignore-term S       ignore SIGTERM and sleep S seconds
//   print-lines K       write K lines to stdout and K to stderr, each line in several writes
//   no-newline          write a line without its newline to stdout and to stderr
//
// With COLLIE_TEST_PID_DIR set, each rank first writes its pid to $COLLIE_TEST_PID_DIR/<rank>.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

namespace {

int envInt(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : -1;
}

void sleepSeconds(double s) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(s);
  ts.tv_nsec = static_cast<long>((s - static_cast<double>(ts.tv_sec)) * 1e9);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void writeAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

std::string pidFile(int rank) {
  const char* dir = std::getenv("COLLIE_TEST_PID_DIR");
  if (!dir) return "";
  return std::string(dir) + "/" + std::to_string(rank);
}

// Written to a temporary name and renamed, so a reader never sees a half-written pid.
void recordPid(int rank) {
  std::string path = pidFile(rank);
  if (path.empty()) return;
  std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) return;
  std::fprintf(f, "%d\n", static_cast<int>(getpid()));
  std::fclose(f);
  std::rename(tmp.c_str(), path.c_str());
}

// The failing rank waits for the others so that the test knows every pid it must check.
void waitForAllRanks(int world) {
  if (pidFile(0).empty()) return;
  for (int tries = 0; tries < 1000; ++tries) {
    int up = 0;
    for (int r = 0; r < world; ++r) up += access(pidFile(r).c_str(), F_OK) == 0 ? 1 : 0;
    if (up == world) return;
    sleepSeconds(0.01);
  }
}

void printLines(int rank, int count) {
  for (int i = 0; i < count; ++i) {
    for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
      std::string head = "rank=" + std::to_string(rank) + " stream=" + (fd == 1 ? "out" : "err");
      writeAll(fd, head);
      usleep(50);
      writeAll(fd, " line=" + std::to_string(i) + " ");
      usleep(50);
      writeAll(fd, std::string(static_cast<size_t>(20 + i % 50), 'x') + "\n");
    }
  }
}

int usage() {
  std::fprintf(stderr, "collie-test-rank: unknown or incomplete command\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int rank = envInt("RANK");
  int world = envInt("WORLD_SIZE");
  recordPid(rank);
  if (argc < 2) return usage();
  std::string cmd = argv[1];
  if (cmd == "env") {
    auto get = [](const char* n) {
      const char* v = std::getenv(n);
      return v ? v : "-";
    };
    std::printf(
        "RANK=%s WORLD_SIZE=%s LOCAL_RANK=%s LOCAL_WORLD_SIZE=%s MASTER_ADDR=%s "
        "MASTER_PORT=%s\n",
        get("RANK"), get("WORLD_SIZE"), get("LOCAL_RANK"), get("LOCAL_WORLD_SIZE"),
        get("MASTER_ADDR"), get("MASTER_PORT"));
    return 0;
  }
  if ((cmd == "exit-rank" && argc >= 4) || (cmd == "kill-rank" && argc >= 3)) {
    if (rank == std::atoi(argv[2])) {
      waitForAllRanks(world);
      if (cmd == "kill-rank") raise(SIGKILL);
      return std::atoi(argv[3]);
    }
    sleepSeconds(30);
    return 0;
  }
  if (cmd == "sleep" && argc >= 3) {
    sleepSeconds(std::atof(argv[2]));
    return 0;
  }
  if (cmd == "ignore-term" && argc >= 3) {
    signal(SIGTERM, SIG_IGN);
    sleepSeconds(std::atof(argv[2]));
    return 0;
  }
  if (cmd == "print-lines" && argc >= 3) {
    printLines(rank, std::atoi(argv[2]));
    return 0;
  }
  if (cmd == "no-newline") {
    writeAll(STDOUT_FILENO, "partial out");
    writeAll(STDERR_FILENO, "partial err");
    return 0;
  }
  return usage();
}
