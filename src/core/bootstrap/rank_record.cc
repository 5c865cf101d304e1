// Rank records: "<nranks> <host> <machine>", fields free of spaces (hostId makes them so).
#include "src/core/bootstrap/rank_record.h"

#include <algorithm>
#include <sstream>

namespace collie {

std::string encodeRankRecord(const RankRecord& r) {
  return std::to_string(r.nranks) + " " + r.host + " " + r.machine;
}

StatusOr<RankRecord> decodeRankRecord(const std::string& s, int rank) {
  std::istringstream in(s);
  RankRecord r;
  std::string extra;
  if (!(in >> r.nranks >> r.host >> r.machine) || (in >> extra))
    return invalidUsage("rank " + std::to_string(rank) + " published a garbled record '" + s +
                        "' (a rank of another Collie version?)");
  return r;
}

HostLayout layoutOf(const std::vector<RankRecord>& records, int self) {
  HostLayout l;
  const RankRecord& me = records[static_cast<size_t>(self)];
  auto sameHost = [&](const RankRecord& r) { return r.host == me.host; };
  auto sameMachine = [&](const RankRecord& r) { return r.machine == me.machine; };
  l.localRanks = static_cast<int>(std::count_if(records.begin(), records.end(), sameHost));
  l.machineRanks = std::max(
      l.localRanks, static_cast<int>(std::count_if(records.begin(), records.end(), sameMachine)));
  for (size_t r = 0; r < records.size(); ++r) {
    size_t first = 0;
    while (records[first].host != records[r].host) ++first;
    l.hostOf.push_back(static_cast<int>(first));
    l.places.push_back(RankPlace{static_cast<int>(r), records[r].host});
  }
  return l;
}

}  // namespace collie
