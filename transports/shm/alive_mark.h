// AliveMark: a process's sign of life in shared memory that other processes can read whatever
// PID namespace they are in, where its pid means nothing to them. A robust, process-shared
// mutex that a long-lived thread of the owner holds: the kernel marks it (EOWNERDEAD) when that
// thread dies with the process. The first reader to find the mark records it in died, which
// every later look reads first: the mutex itself says so only once (glibc leaves a mutex that
// was let go unrecovered locked by the next reader, who then reads as its holder).
#pragma once

#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <ctime>

namespace collie {

struct AliveMark {
  pthread_mutex_t mutex;
  std::atomic<uint32_t> died;

  // By the owner, in shared memory, before anyone looks.
  void init() {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&mutex, &attr);
    pthread_mutexattr_destroy(&attr);
    died.store(0, std::memory_order_relaxed);
  }
  // By the owner's long-lived thread, until release from the same thread; false where the mark
  // stayed taken for timeoutMs (0: a single try). Readers take it only for an instant, but one
  // stopped in that instant would otherwise stop the owner with it.
  bool hold(int64_t timeoutMs) {
    int r;
    if (timeoutMs <= 0) {
      r = pthread_mutex_trylock(&mutex);
    } else {
      // Against the monotonic clock: a wall clock set back while the owner waits would stretch
      // the wait by as much.
      timespec until;
      clock_gettime(CLOCK_MONOTONIC, &until);
      until.tv_sec += static_cast<time_t>(timeoutMs / 1000);
      until.tv_nsec += static_cast<long>(timeoutMs % 1000) * 1000000L;
      if (until.tv_nsec >= 1000000000L) {
        until.tv_sec += 1;
        until.tv_nsec -= 1000000000L;
      }
      r = pthread_mutex_clocklock(&mutex, CLOCK_MONOTONIC, &until);
    }
    // A reader that died while it looked left the mark on a live owner: mend it.
    if (r == EOWNERDEAD) r = pthread_mutex_consistent(&mutex);
    // The holder now is alive: a reader that found the mark left by such a dead reader took it
    // for the owner's death.
    if (r == 0) died.store(0, std::memory_order_release);
    return r == 0;
  }
  void release() { pthread_mutex_unlock(&mutex); }
  // By anyone else: whether the holder died. Free (not held yet, or let go at the end) is alive.
  bool holderDied() {
    if (died.load(std::memory_order_acquire) != 0) return true;
    const int r = pthread_mutex_trylock(&mutex);
    if (r == 0) {
      pthread_mutex_unlock(&mutex);
      return died.load(std::memory_order_acquire) != 0;
    }
    if (r == EOWNERDEAD) {
      died.store(1, std::memory_order_release);
      pthread_mutex_consistent(&mutex);
      pthread_mutex_unlock(&mutex);
      return true;
    }
    return r == ENOTRECOVERABLE;
  }
};

}  // namespace collie
