// The staging buffers' slots (see shm_slots.h).
#include "transports/shm/shm_slots.h"

#include <algorithm>

namespace collie {

namespace {

constexpr size_t kLine = 64;

class StagingSlots : public ShmSlots {
 public:
  StagingSlots(std::vector<char*> byRank, size_t slotBytes)
      : byRank_(std::move(byRank)), slotBytes_(slotBytes) {}
  char* slot(int rank, uint64_t event) override {
    return byRank_[static_cast<size_t>(rank)] + (event % kSlots) * slotBytes_;
  }
  size_t slotBytes() const override { return slotBytes_; }

 private:
  std::vector<char*> byRank_;  // indexed by rank; nullptr off this host
  size_t slotBytes_;
};

}  // namespace

std::shared_ptr<ShmSlots> makeShmSlots(const std::vector<int>& localRanks,
                                       const std::vector<char*>& staging, size_t stagingBytes) {
  const int top = localRanks.empty() ? 0 : *std::max_element(localRanks.begin(), localRanks.end());
  std::vector<char*> byRank(static_cast<size_t>(top) + 1, nullptr);
  for (size_t i = 0; i < localRanks.size(); ++i) byRank[localRanks[i]] = staging[i];
  // Whole cache lines: a slot's flags never share a line with the slot before.
  return std::make_shared<StagingSlots>(std::move(byRank),
                                        (stagingBytes / ShmSlots::kSlots) & ~size_t{kLine - 1});
}

}  // namespace collie
