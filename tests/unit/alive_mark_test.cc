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
  int go[2], held[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(held), 0);
  const pid_t p = fork();
  if (p == 0) {
    if (!m->hold(1000)) _exit(2);
    char c = 1;
    if (write(held[1], &c, 1) != 1 || read(go[0], &c, 1) != 1) _exit(1);
    m->release();
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(held[0], &c, 1), 1);
  EXPECT_FALSE(m->holderDied()) << "held by a live process";
  EXPECT_EQ(inChild([m] { return m->holderDied() ? 1 : 0; }), 0);
  ASSERT_EQ(write(go[1], &c, 1), 1);
  int st = 0;
  ASSERT_EQ(waitpid(p, &st, 0), p);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  EXPECT_FALSE(m->holderDied()) << "let go: alive";
  for (int fd : {go[0], go[1], held[0], held[1]}) close(fd);
  munmap(m, sizeof(AliveMark));
}

// A reader that stops while it has the mark in hand (it takes it for an instant to look) does
// not stop the owner: hold gives up at its deadline, and takes the mark once the reader lets go.
TEST(AliveMark, HoldGivesUpWhileAStoppedReaderHasTheMark) {
  AliveMark* m = sharedMark();
  ASSERT_NE(m, nullptr);
  int go[2], taken[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(taken), 0);
  const pid_t p = fork();
  if (p == 0) {
    char c = 1;
    if (pthread_mutex_trylock(&m->mutex) != 0) _exit(1);  // a look, stopped halfway
    if (write(taken[1], &c, 1) != 1 || read(go[0], &c, 1) != 1) _exit(1);
    pthread_mutex_unlock(&m->mutex);
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(taken[0], &c, 1), 1);
  EXPECT_FALSE(m->hold(0));
  EXPECT_FALSE(m->hold(200));
  ASSERT_EQ(write(go[1], &c, 1), 1);
  int st = 0;
  ASSERT_EQ(waitpid(p, &st, 0), p);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  EXPECT_TRUE(m->hold(0)) << "let go: the owner takes it";
  EXPECT_FALSE(m->holderDied());
  m->release();
  for (int fd : {go[0], go[1], taken[0], taken[1]}) close(fd);
  munmap(m, sizeof(AliveMark));
}

}  // namespace
}  // namespace collie
