// Pinning for the probes of collie-limits.
#pragma once

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

namespace collie::limits {

// Keeps the calling thread on one CPU (cpu modulo the CPUs online). In a process of one thread
// that pins the process.
inline void pinThisThread(int cpu) {
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu <= 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu % ncpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

}  // namespace collie::limits
