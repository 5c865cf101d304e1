// The executor of ChunkSchedule (see chunk_schedule.h).
#include "algorithms/chunk_schedule.h"

#include <algorithm>
#include <cstring>

namespace collie {

namespace {

constexpr size_t kWindow = 4;  // receives posted ahead of the one being processed
char gEmpty[1];

// One execution of a schedule: its tags, staging slots and requests, and the steps that move
// them. A receive is processed in order; sends go out as soon as what they forward is ready.
class ScheduleRun {
 public:
  ScheduleRun(const ChunkSchedule& s, const CollArgs& a, AlgoContext& ctx, uint8_t algoId)
      : s_(s),
        a_(a),
        ctx_(ctx),
        algoId_(algoId),
        nr_(s.recvs.size()),
        ns_(s.sends.size()),
        esz_(dtypeSize(a.dtype)),
        op_(a.op == collieAvg ? collieSum : a.op),
        kSlots_(std::max(kWindow, s.minSlots)),
        sreq_(ns_),
        rreq_(nr_) {}

  Status run() {
    for (const auto& c : s_.copiesFirst)
      if (c.bytes > 0 && c.dst != c.src) memcpy(c.dst, c.src, c.bytes);
    assignTags();
    assignSlots();
    COLLIE_RETURN_IF_ERROR(findForwards());
    while (rd_ < nr_) {
      COLLIE_RETURN_IF_ERROR(postSends());
      COLLIE_RETURN_IF_ERROR(postRecvs());
      if (ri_ == rd_)
        return internalError("schedule stalls: its sends and receives are out of order");
      COLLIE_RETURN_IF_ERROR(awaitRecv());
      process(rd_++);
    }
    return finishSends();
  }

 private:
  // The k-th frame between two ranks in one direction carries tag k.
  void assignTags() {
    std::vector<uint32_t> perPeer(static_cast<size_t>(ctx_.nranks), 0);
    rtag_.resize(nr_);
    stag_.resize(ns_);
    for (size_t i = 0; i < nr_; ++i) rtag_[i] = perPeer[static_cast<size_t>(s_.recvs[i].peer)]++;
    std::fill(perPeer.begin(), perPeer.end(), 0);
    for (size_t i = 0; i < ns_; ++i) stag_[i] = perPeer[static_cast<size_t>(s_.sends[i].peer)]++;
  }

  // Staged receives take the slots in turn; prevUser_ is the receive that held a slot before.
  void assignSlots() {
    size_t staged = 0;
    slot_.assign(nr_, -1);
    prevUser_.assign(nr_, -1);
    std::vector<int> lastUser(kSlots_, -1);
    for (size_t i = 0; i < nr_; ++i) {
      if (s_.recvs[i].dst != nullptr) continue;
      slotBytes_ = std::max(slotBytes_, s_.recvs[i].bytes);
      slot_[i] = static_cast<int>(staged++ % kSlots_);
      prevUser_[i] = lastUser[static_cast<size_t>(slot_[i])];
      lastUser[static_cast<size_t>(slot_[i])] = static_cast<int>(i);
    }
    if (ctx_.scratch->size() < kSlots_ * slotBytes_) ctx_.scratch->resize(kSlots_ * slotBytes_);
    slots_ = ctx_.scratch->data();
  }

  // The sends that forward each receive's landed bytes.
  Status findForwards() {
    forwards_.resize(nr_);
    for (size_t k = 0; k < ns_; ++k) {
      const ScheduleSend& x = s_.sends[k];
      if (x.dep >= static_cast<int>(nr_))
        return internalError("schedule: a send depends on no receive");
      if (x.src == nullptr && x.dep >= 0) forwards_[static_cast<size_t>(x.dep)].push_back(k);
    }
    return Status::ok();
  }

  char* landing(size_t i) const {
    if (s_.recvs[i].dst != nullptr) return s_.recvs[i].dst;
    return slotBytes_ == 0 ? gEmpty : slots_ + static_cast<size_t>(slot_[i]) * slotBytes_;
  }

  bool earlierSendsDone() {
    while (unfinished_ < si_ && sreq_[unfinished_].done) ++unfinished_;
    return unfinished_ == si_;
  }

  bool depProcessed(const ScheduleSend& x) const {
    return x.dep < 0 || static_cast<size_t>(x.dep) < rd_;
  }

  Status postSends() {
    while (si_ < ns_ && depProcessed(s_.sends[si_])) {
      const ScheduleSend& x = s_.sends[si_];
      if (x.afterSends && !earlierSendsDone()) break;
      const char* src = x.src != nullptr ? x.src
                        : x.dep >= 0     ? landing(static_cast<size_t>(x.dep))
                                         : gEmpty;
      Connection* c = ctx_.conns[x.peer];
      if (c == nullptr) return internalError("schedule: a send to this rank itself");
      COLLIE_RETURN_IF_ERROR(
          c->isend(src, x.bytes, ctx_.tagFor(a_, stag_[si_], algoId_), &sreq_[si_]));
      ++si_;
    }
    return Status::ok();
  }

  // A slot is landed in again only once the sends forwarding its last content are done.
  Status slotFree(size_t i, bool* free) {
    *free = true;
    if (prevUser_[i] < 0) return Status::ok();
    for (size_t k : forwards_[static_cast<size_t>(prevUser_[i])]) {
      if (k >= si_) {
        *free = false;
        return Status::ok();
      }
      if (!sreq_[k].done)
        COLLIE_RETURN_IF_ERROR(ctx_.poller->wait(&sreq_[k], ctx_.deadline, ctx_.opName));
    }
    return Status::ok();
  }

  Status postRecvs() {
    while (ri_ < nr_ && ri_ < rd_ + kWindow) {
      bool free = true;
      COLLIE_RETURN_IF_ERROR(slotFree(ri_, &free));
      if (!free) break;
      const ScheduleRecv& x = s_.recvs[ri_];
      Connection* c = ctx_.conns[x.peer];
      if (c == nullptr) return internalError("schedule: a receive from this rank itself");
      COLLIE_RETURN_IF_ERROR(
          c->irecv(landing(ri_), x.bytes, ctx_.tagFor(a_, rtag_[ri_], algoId_), &rreq_[ri_]));
      ++ri_;
    }
    return Status::ok();
  }

  // A send held back for the sends before it goes out as soon as they complete, not only after
  // this receive: its peer may be waiting for it to send what this receive needs.
  Status awaitRecv() {
    while (!rreq_[rd_].done) {
      const bool held =
          si_ < ns_ && s_.sends[si_].afterSends && unfinished_ < si_ && depProcessed(s_.sends[si_]);
      if (!held) return ctx_.poller->wait(&rreq_[rd_], ctx_.deadline, ctx_.opName);
      Request* either[2] = {&rreq_[rd_], &sreq_[unfinished_]};
      COLLIE_RETURN_IF_ERROR(ctx_.poller->progressUntilAny(either, 2, ctx_.deadline, ctx_.opName));
      COLLIE_RETURN_IF_ERROR(postSends());
    }
    return Status::ok();
  }

  // Reduces or copies receive i where the schedule asks, once it has landed.
  void process(size_t i) {
    const ScheduleRecv& x = s_.recvs[i];
    const char* landed = landing(i);
    const size_t elems = x.bytes / esz_;
    char* out = x.out != nullptr ? x.out : const_cast<char*>(landed);
    if (x.bytes > 0 && x.with != nullptr) {
      reduce(out, x.landedFirst ? landed : x.with, x.landedFirst ? x.with : landed, elems, a_.dtype,
             op_);
    } else if (x.bytes > 0 && x.out != nullptr && x.out != landed) {
      memcpy(x.out, landed, x.bytes);
    }
    if (x.finalAvg && x.bytes > 0) scaleForAvg(out, elems, a_.dtype, ctx_.nranks);
  }

  Status finishSends() {
    COLLIE_RETURN_IF_ERROR(postSends());
    while (si_ < ns_ && !earlierSendsDone()) {
      COLLIE_RETURN_IF_ERROR(ctx_.poller->wait(&sreq_[unfinished_], ctx_.deadline, ctx_.opName));
      COLLIE_RETURN_IF_ERROR(postSends());
    }
    if (si_ != ns_) return internalError("schedule: sends left that depend on nothing processed");
    for (auto& q : sreq_)
      if (!q.done) COLLIE_RETURN_IF_ERROR(ctx_.poller->wait(&q, ctx_.deadline, ctx_.opName));
    return Status::ok();
  }

  const ChunkSchedule& s_;
  const CollArgs& a_;
  AlgoContext& ctx_;
  const uint8_t algoId_;
  const size_t nr_, ns_, esz_;
  const collieRedOp_t op_;
  const size_t kSlots_;
  std::vector<uint32_t> rtag_, stag_;
  size_t slotBytes_ = 0;
  char* slots_ = nullptr;
  std::vector<int> slot_, prevUser_;
  std::vector<std::vector<size_t>> forwards_;
  std::vector<Request> sreq_, rreq_;
  size_t si_ = 0, ri_ = 0, rd_ = 0;  // sends posted, receives posted, receives processed
  size_t unfinished_ = 0;            // every send before it has completed
};

}  // namespace

std::vector<ChunkSpan> splitChunks(size_t bytes, size_t chunkBytes, size_t esz) {
  size_t step = std::max<size_t>(esz, chunkBytes / esz * esz);
  std::vector<ChunkSpan> out;
  if (bytes == 0) out.push_back({0, 0});
  for (size_t off = 0; off < bytes; off += step) out.push_back({off, std::min(step, bytes - off)});
  return out;
}

Status runChunkSchedule(const ChunkSchedule& s, const CollArgs& a, AlgoContext& ctx,
                        uint8_t algoId) {
  return ScheduleRun(s, a, ctx, algoId).run();
}

}  // namespace collie
