// Init's first phase: the store found (or served), this rank's claim, and every rank's record.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "src/core/bootstrap/bootstrap.h"
#include "src/core/bootstrap/rank_record.h"
#include "src/core/bootstrap/store.h"

namespace collie {

struct Rendezvous {
  std::unique_ptr<StoreServer> server;  // where this rank serves the store
  std::unique_ptr<TcpStore> store;
  std::vector<RankRecord> records;  // by rank
};

// Which init failed and where its store is, for every init error.
std::string initWhere(const BootstrapInfo& info);

// Serves the store where this rank does, connects to it, claims this rank and publishes mine;
// then waits until deadline (connectMs after init began) for every rank's record. info.storeAddr
// becomes the store's.
Status rendezvous(BootstrapInfo* info, const RankRecord& mine, int64_t connectMs, int64_t requestMs,
                  const Deadline& deadline, Rendezvous* out);

// Init's last step on the store: where this rank serves it, it waits for every rank to be past
// its use, so that nobody loses it in the middle.
Status leaveRendezvous(Rendezvous* rv, int rank, int nranks, const Deadline& deadline);

// Init failed on this rank after it reached the store: it says so, and where it serves the
// store it keeps it briefly, until every rank has left or failed too, so that the others report
// their own reason rather than a store that went away.
void abandonRendezvous(Rendezvous* rv, int rank, int nranks, const Deadline& deadline);

}  // namespace collie
