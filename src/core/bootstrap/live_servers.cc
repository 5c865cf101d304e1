// The fork guard and the registry of store servers alive in this process.
#include "src/core/bootstrap/live_servers.h"

#include <pthread.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace collie {

namespace {

// Never destroyed: servers that static objects hold stop at exit, after statics made later
// than those objects are gone.
std::mutex& liveServersMu() {
  static auto* mu = new std::mutex;
  return *mu;
}

std::vector<std::pair<int, uint64_t>>& liveServers() {
  static auto* live = new std::vector<std::pair<int, uint64_t>>;
  return *live;
}

}  // namespace

std::mutex& serverWorkMu() {
  static std::mutex mu;
  return mu;
}

void guardForks() {
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_atfork([] { serverWorkMu().lock(); }, [] { serverWorkMu().unlock(); },
                   [] { serverWorkMu().unlock(); });
  });
}

void rememberServer(int port, uint64_t commId) {
  std::lock_guard<std::mutex> l(liveServersMu());
  liveServers().emplace_back(port, commId);
}

void forgetServer(int port, uint64_t commId) {
  std::lock_guard<std::mutex> l(liveServersMu());
  auto& live = liveServers();
  auto it = std::find(live.begin(), live.end(), std::make_pair(port, commId));
  if (it != live.end()) live.erase(it);
}

bool serverIsLive(int port, uint64_t commId) {
  std::lock_guard<std::mutex> l(liveServersMu());
  const auto& live = liveServers();
  return std::find(live.begin(), live.end(), std::make_pair(port, commId)) != live.end();
}

}  // namespace collie
