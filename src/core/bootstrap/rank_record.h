// What every rank publishes about itself at init, and the host layout all ranks derive from it.
#pragma once

#include <string>
#include <vector>

#include "src/base/status.h"
#include "transports/transport.h"

namespace collie {

struct RankRecord {
  int nranks = 0;       // the size this rank was started with: all must agree
  std::string host;     // hostId(): equal strings share shared memory
  std::string machine;  // machineId(): equal strings share cores
};

// A record as the store holds it, and back; decoding names the rank whose record is garbled.
std::string encodeRankRecord(const RankRecord& r);
StatusOr<RankRecord> decodeRankRecord(const std::string& s, int rank);

// Where the ranks are, as every rank computes it alike from the records.
struct HostLayout {
  std::vector<int> hostOf;        // per rank, the lowest rank on its host
  int localRanks = 1;             // ranks on this host, this one included
  int machineRanks = 1;           // ranks on this machine (kernel), at least localRanks
  std::vector<RankPlace> places;  // per rank, for the transports' choice
};
HostLayout layoutOf(const std::vector<RankRecord>& records, int self);

}  // namespace collie
