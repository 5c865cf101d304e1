// The store servers alive in this process, and the guard that keeps fork() away from their
// threads while they work.
#pragma once

#include <cstdint>
#include <mutex>

namespace collie {

// Held by every server thread except while it sleeps in poll(). A child forked while a
// server held a lock (the allocator's too) would inherit it held forever.
std::mutex& serverWorkMu();
// Makes fork() take serverWorkMu() first, so a child sees the servers between two rounds.
void guardForks();

// The registry, by port and job (commId): a communicator made twice from one environment
// finds its port taken by the first one's server, and must know that server is its own.
void rememberServer(int port, uint64_t commId);
void forgetServer(int port, uint64_t commId);
bool serverIsLive(int port, uint64_t commId);

}  // namespace collie
