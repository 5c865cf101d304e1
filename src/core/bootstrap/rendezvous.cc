// The rendezvous: store server and client, the rank claim, and the rank records.
#include "src/core/bootstrap/rendezvous.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdlib>

#include "src/core/bootstrap/torch_store_client.h"

namespace collie {

namespace {

// Why a rank's store or its claim is taken where a program makes a second communicator from
// what made one still alive.
constexpr const char* kSecondFromOneEnvironment =
    "a communicator made from the same environment or unique id is still alive in this job: "
    "another one at the same time needs a MASTER_PORT of its own, or a new collieGetUniqueId";

std::string joinRanks(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 32; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  if (v.size() > 32) s += ", ... (" + std::to_string(v.size()) + " in all)";
  return s;
}

std::string rankKey(const char* kind, int r) { return std::string(kind) + "/" + std::to_string(r); }

// A store of this job made from the same environment is alive here: this one's would take
// another derived port (or fail to bind) while the other ranks find the first one's.
Status checkNoLiveStore(const BootstrapInfo& info) {
  if (!info.serveStore || info.server) return Status::ok();
  for (const SockAddr& a :
       info.storeChoices.empty() ? std::vector<SockAddr>{info.storeAddr} : info.storeChoices)
    if (StoreServer::servesInThisProcess(a.port(), info.auth.commId))
      return invalidUsage(std::string(kSecondFromOneEnvironment) + " (its store serves on port " +
                          std::to_string(a.port()) + ")");
  return Status::ok();
}

// Ports derived from the job id: the first free one (the other ranks look on each in turn).
StatusOr<std::unique_ptr<StoreServer>> serveOnAChoice(BootstrapInfo* info) {
  Status busy = Status::ok();
  for (const SockAddr& a : info->storeChoices) {
    auto srv = StoreServer::start(a, info->auth);
    if (srv.isOk()) {
      info->storeAddr = a;
      return srv;
    }
    busy = srv.status();
  }
  return busy.withContext("rank 0 cannot serve the store on any of the " +
                          std::to_string(info->storeChoices.size()) +
                          " ports derived from the job id (set MASTER_ADDR and MASTER_PORT)");
}

// MASTER_ADDR may name this host by an address it cannot bind (NAT, a name): then any address.
StatusOr<std::unique_ptr<StoreServer>> serveOnAddress(const BootstrapInfo& info) {
  auto srv = StoreServer::start(info.storeAddr, info.auth);
  if (srv.isOk()) return srv;
  SockAddr any;
  auto* a = reinterpret_cast<sockaddr_in*>(&any.ss);
  a->sin_family = AF_INET;
  a->sin_addr.s_addr = htonl(INADDR_ANY);
  any.len = sizeof(sockaddr_in);
  any.setPort(info.storeAddr.port());
  srv = StoreServer::start(any, info.auth);
  if (!srv.isOk()) return srv.status().withContext("rank 0 cannot serve the store");
  return srv;
}

Status serveStore(BootstrapInfo* info, const Deadline& deadline, Rendezvous* rv) {
  COLLIE_RETURN_IF_ERROR(checkNoLiveStore(*info));
  if (info->server) {
    rv->server = std::move(info->server);
  } else if (info->serveStore) {
    auto srv = info->storeChoices.empty() ? serveOnAddress(*info) : serveOnAChoice(info);
    if (!srv.isOk()) return srv.status();
    rv->server = srv.take();
    if (!info->agentKey.empty()) {
      info->storeAddr.setPort(rv->server->address().port());
      COLLIE_RETURN_IF_ERROR(
          publishStorePort(info->agentStore, info->agentKey, info->storeAddr.port(), deadline));
    }
  }
  return Status::ok();
}

Status connectStore(BootstrapInfo* info, int64_t requestMs, const Deadline& deadline,
                    Rendezvous* rv) {
  if (!info->agentKey.empty() && !rv->server) {
    COLLIE_ASSIGN_OR_RETURN(int port, readStorePort(info->agentStore, info->agentKey, deadline));
    info->storeAddr.setPort(port);
  }
  auto store = rv->server || info->storeChoices.empty()
                   ? TcpStore::connect(info->storeAddr, info->auth, deadline)
                   : TcpStore::connectAny(info->storeChoices, info->auth, deadline);
  if (!store.isOk()) return store.status();
  rv->store = store.take();
  rv->store->setRequestTimeoutMs(requestMs);
  if (!info->storeChoices.empty()) info->storeAddr = rv->store->server();
  return Status::ok();
}

Status claimRank(Store* store, int rank) {
  COLLIE_ASSIGN_OR_RETURN(int64_t claims, store->add(rankKey("claim", rank), 1));
  if (claims > 1)
    return invalidUsage("two processes claim rank " + std::to_string(rank) +
                        "; every rank must be unique (check RANK / the rank argument), or " +
                        kSecondFromOneEnvironment);
  return Status::ok();
}

Status missingRanks(const Status& w, const std::vector<std::string>& missing, int64_t connectMs) {
  std::vector<int> ranks;
  for (const auto& k : missing) ranks.push_back(atoi(k.c_str() + 5));
  if (w.code() == collieTimeout)
    return timeoutError("rendezvous timed out after " + std::to_string(connectMs) +
                        " ms; ranks never arrived: " + joinRanks(ranks) +
                        " (see COLLIE_CONNECT_TIMEOUT_MS / COLLIE_TIMEOUT_MS)");
  // Typically the store's rank gave up first; say who was missing all the same.
  if (ranks.empty()) return w;
  return Status(w.code(), "rendezvous failed (" + w.message() +
                              "); ranks never arrived: " + joinRanks(ranks));
}

Status gatherRecords(Store* store, int nranks, int64_t connectMs, const Deadline& deadline,
                     std::vector<RankRecord>* out) {
  std::vector<std::string> keys, missing;
  for (int r = 0; r < nranks; ++r) keys.push_back(rankKey("rank", r));
  Status w = store->wait(keys, deadline, &missing);
  if (!w.isOk()) return missingRanks(w, missing, connectMs);
  for (int r = 0; r < nranks; ++r) {
    COLLIE_ASSIGN_OR_RETURN(std::string v, store->get(keys[static_cast<size_t>(r)], deadline));
    COLLIE_ASSIGN_OR_RETURN(RankRecord rec, decodeRankRecord(v, r));
    if (rec.nranks != nranks)
      return invalidUsage("rank " + std::to_string(r) + " was started with " +
                          std::to_string(rec.nranks) + " ranks but this rank with " +
                          std::to_string(nranks) + "; all ranks must agree on the size");
    out->push_back(std::move(rec));
  }
  return Status::ok();
}

}  // namespace

std::string initWhere(const BootstrapInfo& info) {
  return "init of rank " + std::to_string(info.rank) + " of " + std::to_string(info.nranks) + " (" +
         info.how + ", store " + info.storeAddr.toString() + ")";
}

Status rendezvous(BootstrapInfo* info, const RankRecord& mine, int64_t connectMs, int64_t requestMs,
                  const Deadline& deadline, Rendezvous* out) {
  COLLIE_RETURN_IF_ERROR(serveStore(info, deadline, out));
  COLLIE_RETURN_IF_ERROR(connectStore(info, requestMs, deadline, out));
  COLLIE_RETURN_IF_ERROR(claimRank(out->store.get(), info->rank));
  COLLIE_RETURN_IF_ERROR(out->store->set(rankKey("rank", info->rank), encodeRankRecord(mine)));
  return gatherRecords(out->store.get(), info->nranks, connectMs, deadline, &out->records);
}

Status leaveRendezvous(Rendezvous* rv, int rank, int nranks, const Deadline& deadline) {
  COLLIE_RETURN_IF_ERROR(rv->store->set(rankKey("ready", rank), "1"));
  if (!rv->server) return Status::ok();
  std::vector<std::string> ready;
  for (int r = 0; r < nranks; ++r) ready.push_back(rankKey("ready", r));
  return rv->store->wait(ready, deadline, nullptr);
}

void abandonRendezvous(Rendezvous* rv, int rank, int nranks, const Deadline& deadline) {
  if (!rv->store) return;
  // A failure that every rank meets alike (a setting, an unreachable peer) ends each init soon.
  constexpr int64_t kLingerMs = 2000;
  leaveRendezvous(rv, rank, nranks, Deadline::afterMs(deadline.remainingMs(kLingerMs)));
}

}  // namespace collie
