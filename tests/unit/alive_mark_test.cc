// AliveMark across processes: a holder that dies reads as dead to every later look, from any
// process, however many there are; a live holder, or none, reads as alive.
#include "transports/shm/alive_mark.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <new>

namespace collie {
namespace {

// A mark in memory that forked processes share.
AliveMark* sharedMark() {
  void* p =
      mmap(nullptr, sizeof(AliveMark), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  AliveMark* m = new (p) AliveMark;
  m->init();
  return m;
}

// Runs fn in a child process; returns its exit status.
template <typename Fn>
int inChild(Fn fn) {
  const pid_t p = fork();
  if (p == 0) _exit(fn());
  int st = 0;
  if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st)) return -1;
  return WEXITSTATUS(st);
}

// A child process that takes the mark (take() returns false where it could not), holds it until
// letGo(), then lets it go with release() and exits 0.
class HeldInChild {
 public:
  template <typename Take, typename Release>
  bool start(Take take, Release release) {
    if (pipe(go_) != 0 || pipe(taken_) != 0) return false;
    pid_ = fork();
    if (pid_ == 0) {
      char c = 1;
      if (!take()) _exit(2);
      if (write(taken_[1], &c, 1) != 1 || read(go_[0], &c, 1) != 1) _exit(1);
      release();
      _exit(0);
    }
    char c = 0;
    return pid_ > 0 && read(taken_[0], &c, 1) == 1;
  }
  // Lets the child go; true where it then exited 0.
  bool letGo() {
    char c = 1;
    int st = 0;
    return write(go_[1], &c, 1) == 1 && waitpid(pid_, &st, 0) == pid_ && WIFEXITED(st) &&
           WEXITSTATUS(st) == 0;
  }
  ~HeldInChild() {
    for (int fd : {go_[0], go_[1], taken_[0], taken_[1]})
      if (fd >= 0) close(fd);
  }

 private:
  int go_[2] = {-1, -1}, taken_[2] = {-1, -1};
  pid_t pid_ = -1;
};

TEST(AliveMark, AHolderThatDiesReadsDeadToEveryLaterLook) {
  AliveMark* m = sharedMark();
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(m->holderDied()) << "nobody holds it yet: alive";
  ASSERT_EQ(inChild([m] {
              return m->hold(1000) ? 0 : 1;  // dies holding it
            }),
            0);
  // Three readers in processes of their own, then this one, twice each: before the died flag,
  // the first look saw EOWNERDEAD, the second ENOTRECOVERABLE, and the third the second reader
  // as the holder: alive.
  for (int reader = 0; reader < 3; ++reader)
    EXPECT_EQ(inChild([m] { return m->holderDied() && m->holderDied() ? 0 : 1; }), 0)
        << "reader " << reader;
  EXPECT_TRUE(m->holderDied());
  EXPECT_TRUE(m->holderDied());
  munmap(m, sizeof(AliveMark));
}

TEST(AliveMark, ALiveHolderReadsAliveAndLetsGo) {
  AliveMark* m = sharedMark();
  ASSERT_NE(m, nullptr);
  HeldInChild holder;
  ASSERT_TRUE(holder.start([m] { return m->hold(1000); }, [m] { m->release(); }));
  EXPECT_FALSE(m->holderDied()) << "held by a live process";
  EXPECT_EQ(inChild([m] { return m->holderDied() ? 1 : 0; }), 0);
  EXPECT_TRUE(holder.letGo());
  EXPECT_FALSE(m->holderDied()) << "let go: alive";
  munmap(m, sizeof(AliveMark));
}

// A reader that stops while it has the mark in hand (it takes it for an instant to look) does
// not stop the owner: hold gives up at its deadline, and takes the mark once the reader lets go.
TEST(AliveMark, HoldGivesUpWhileAStoppedReaderHasTheMark) {
  AliveMark* m = sharedMark();
  ASSERT_NE(m, nullptr);
  HeldInChild reader;  // a look, stopped halfway
  ASSERT_TRUE(reader.start([m] { return pthread_mutex_trylock(&m->mutex) == 0; },
                           [m] { pthread_mutex_unlock(&m->mutex); }));
  EXPECT_FALSE(m->hold(0));
  EXPECT_FALSE(m->hold(200));
  EXPECT_TRUE(reader.letGo());
  EXPECT_TRUE(m->hold(0)) << "let go: the owner takes it";
  EXPECT_FALSE(m->holderDied());
  m->release();
  munmap(m, sizeof(AliveMark));
}

// A reader that dies in its look, while the owner has not taken the mark yet, leaves it to the
// next reader as a dead holder's. Once the owner holds it, it reads alive again.
TEST(AliveMark, AReaderThatDiedInItsLookDoesNotMarkTheOwnerDeadOnceItHolds) {
  AliveMark* m = sharedMark();
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(inChild([m] { return pthread_mutex_trylock(&m->mutex) == 0 ? 0 : 1; }), 0);
  EXPECT_TRUE(m->holderDied()) << "the mark of a dead holder, the reader";
  ASSERT_TRUE(m->hold(1000));
  EXPECT_FALSE(m->holderDied()) << "held by the owner, alive";
  EXPECT_EQ(inChild([m] { return m->holderDied() ? 1 : 0; }), 0);
  m->release();
  munmap(m, sizeof(AliveMark));
}

}  // namespace
}  // namespace collie
