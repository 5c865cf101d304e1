// The staging buffers' slots (see shm_slots.h).
#include "transports/shm/shm_slots.h"

#include <algorithm>

namespace collie {

namespace {

constexpr size_t kLine = 64;

}  // namespace

std::shared_ptr<ShmSlots> makeShmSlots(const std::vector<int>& localRanks,
                                       const std::vector<char*>& staging, size_t stagingBytes) {
  const int top = localRanks.empty() ? 0 : *std::max_element(localRanks.begin(), localRanks.end());
  std::vector<char*> byRank(static_cast<size_t>(top) + 1, nullptr);
  for (size_t i = 0; i < localRanks.size(); ++i) byRank[localRanks[i]] = staging[i];
  // Whole cache lines: a slot's flags never share a line with the slot before.
  return std::make_shared<ShmSlots>(std::move(byRank),
                                    (stagingBytes / ShmSlots::kSlots) & ~size_t{kLine - 1});
}

}  // namespace collie
