// Rabenseifner's recursive halving-doubling (patterns/rhd_pattern.h). AllReduce: the fold hands
// the even ranks below 2 * (n - p) to their odd partners; the p remaining ranks reduce-scatter
// by recursive halving (each step exchanges half of the current range with a partner and
// reduces the half kept) and all-gather by recursive doubling; the odd ranks then hand the
// result back. ReduceScatter and AllGather are the two halves on their own, over the blocks of
// the real ranks (a folded pair stands for two blocks), so any nranks works. Every range is
// cut into chunks at block boundaries; a send waits only for the receives that wrote its bytes.
// Each element is reduced once, by the rank that owns its block, so every rank gets the same
// bits.
#include <algorithm>
#include <cstring>
#include <functional>

#include "algorithms/algorithm.h"
#include "algorithms/chunk_schedule.h"
#include "algorithms/patterns/rhd_pattern.h"
#include "algorithms/schedules.h"

namespace collie {

namespace {

constexpr uint8_t kRhdId = 6;
constexpr double kStepEfficiency = 0.8;  // the rate rhd's steps reach, against the ring's

// Builds one rank's schedule. Offsets are bytes into the working buffer (the output for
// AllReduce and AllGather, a full-size accumulator for ReduceScatter).
class Builder {
 public:
  Builder(ChunkSchedule* s, size_t chunkBytes, size_t esz, std::function<size_t(int)> boundary,
          size_t cut = 0)
      : s_(s), chunk_(chunkBytes), esz_(esz), cut_(cut), boundary_(std::move(boundary)) {}

  // [lo, hi) in bytes cut at virtual block boundaries, then into chunks; at least one piece.
  std::vector<ChunkSpan> pieces(size_t lo, size_t hi, int vlo, int vhi) const {
    std::vector<ChunkSpan> out;
    for (int b = vlo; b < vhi; ++b) {
      size_t a = std::max(lo, boundary_(b)), z = std::min(hi, boundary_(b + 1));
      while (a < z) {
        // Pieces also stop at multiples of cut_: the real ranks' blocks of a folded pair.
        const size_t e = cut_ > 0 ? std::min(z, (a / cut_ + 1) * cut_) : z;
        for (const ChunkSpan& c : splitChunks(e - a, chunk_, esz_))
          out.push_back({a + c.off, c.bytes});
        a = e;
      }
    }
    if (out.empty()) out.push_back({lo, 0});
    return out;
  }
  std::vector<ChunkSpan> pieces(rhd::Range r) const {
    return pieces(boundary_(r.lo), boundary_(r.hi), r.lo, r.hi);
  }
  // The pieces of r with those of first (its lower or upper half) before the rest; empty
  // pieces only where r has no bytes.
  std::vector<ChunkSpan> piecesFirst(rhd::Range r, rhd::Range first) const {
    const rhd::Range rest =
        first.lo == r.lo ? rhd::Range{first.hi, r.hi} : rhd::Range{r.lo, first.lo};
    std::vector<ChunkSpan> out;
    for (const rhd::Range& part : {first, rest})
      for (const ChunkSpan& c : pieces(part))
        if (c.bytes > 0) out.push_back(c);
    return out.empty() ? pieces(r) : out;
  }

  // The last receive that wrote into [off, off + bytes) of the working buffer, or -1.
  int writer(size_t off, size_t bytes) const {
    int dep = -1;
    for (size_t i = 0; i < written_.size(); ++i)
      if (written_[i].bytes > 0 && written_[i].off < off + bytes &&
          off < written_[i].off + written_[i].bytes)
        dep = static_cast<int>(i);
    return bytes == 0 && !written_.empty() ? static_cast<int>(written_.size()) - 1 : dep;
  }
  void send(int peer, const char* base, ChunkSpan c, bool fromWork) {
    ScheduleSend x;
    x.peer = peer;
    x.src = base + c.off;
    x.bytes = c.bytes;
    x.dep = fromWork ? writer(c.off, c.bytes) : -1;
    x.afterSends = newStep_;
    newStep_ = false;
    s_->sends.push_back(x);
  }
  // The next send opens a step with a new partner: it waits until the sends before it have
  // completed, so that the new step does not share the link with the previous one, whose
  // partner needs it first (sharing it delays every step's arrival by half a step).
  void nextStep() { newStep_ = !s_->sends.empty(); }
  // A receive of piece c of the working buffer (written = where its result goes there).
  void recv(const ScheduleRecv& x, ChunkSpan c) {
    s_->recvs.push_back(x);
    written_.push_back(c);
  }

 private:
  ChunkSchedule* s_;
  size_t chunk_, esz_, cut_;
  std::function<size_t(int)> boundary_;
  std::vector<ChunkSpan> written_;  // per receive, in order
  bool newStep_ = false;
};

// Recursive halving of virtual rank v over work; the first step reads from cur0 (the input or,
// after a fold, work). lastOut maps a piece of the last step to where its result goes.
void halving(Builder& b, int v, int n, const char* cur0, char* work, bool avg,
             const std::function<char*(ChunkSpan)>& lastOut) {
  const int steps = rhd::numSteps(n);
  for (int k = 0; k < steps; ++k) {
    const int pv = rhd::halvingPartner(v, k, n), peer = rd::realRank(pv, n);
    const char* cur = k == 0 ? cur0 : work;
    // What a rank receives, it sends first the half that it hands on in the next step: that
    // half is reduced (and can leave) while the other still arrives.
    const bool last = k + 1 == steps;
    const rhd::Range sent = rhd::sentInHalving(v, k, n), kept = rhd::keptAfterHalving(v, k, n);
    b.nextStep();
    for (const ChunkSpan& c :
         last ? b.pieces(sent) : b.piecesFirst(sent, rhd::sentInHalving(pv, k + 1, n)))
      b.send(peer, cur, c, cur == work);
    const bool lowerFirst = pv < v;
    for (const ChunkSpan& c :
         last ? b.pieces(kept) : b.piecesFirst(kept, rhd::sentInHalving(v, k + 1, n))) {
      ScheduleRecv x;
      x.peer = peer;
      x.bytes = c.bytes;
      x.with = cur + c.off;
      x.out = k + 1 == steps ? lastOut(c) : work + c.off;
      x.landedFirst = lowerFirst;
      x.finalAvg = avg && k + 1 == steps;
      b.recv(x, c);
    }
  }
}

void doubling(Builder& b, int v, int n, char* work) {
  for (int j = 0; j < rhd::numSteps(n); ++j) {
    const int pv = rhd::doublingPartner(v, j), peer = rd::realRank(pv, n);
    b.nextStep();
    // The range a rank sends holds what it had before the previous step (first) and what that
    // step brought, which may still be arriving.
    const rhd::Range sent = rhd::sentInDoubling(v, j), got = rhd::receivedInDoubling(v, j);
    for (const ChunkSpan& c :
         j == 0 ? b.pieces(sent) : b.piecesFirst(sent, rhd::sentInDoubling(v, j - 1)))
      b.send(peer, work, c, true);
    for (const ChunkSpan& c :
         j == 0 ? b.pieces(got) : b.piecesFirst(got, rhd::sentInDoubling(pv, j - 1))) {
      ScheduleRecv x;
      x.peer = peer;
      x.bytes = c.bytes;
      x.dst = work + c.off;
      b.recv(x, c);
    }
  }
}

void recvInto(Builder& b, int peer, char* work, const std::vector<ChunkSpan>& ps) {
  for (const ChunkSpan& c : ps) {
    ScheduleRecv x;
    x.peer = peer;
    x.bytes = c.bytes;
    x.dst = work + c.off;
    b.recv(x, c);
  }
}

// The fold's receive on an odd rank: the even partner's input, reduced with its own into work.
void foldIn(Builder& b, int peer, const char* in, char* work, const std::vector<ChunkSpan>& ps) {
  for (const ChunkSpan& c : ps) {
    ScheduleRecv x;
    x.peer = peer;
    x.bytes = c.bytes;
    x.with = in + c.off;
    x.out = work + c.off;
    b.recv(x, c);
  }
}

void allReduce(const CollArgs& a, const AlgoContext& ctx, ChunkSchedule* s) {
  const int n = ctx.nranks, r = ctx.rank, rem = rd::remainder(n), p = rd::largestPow2(n);
  const size_t esz = dtypeSize(a.dtype), bytes = a.count * esz;
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  Builder b(s, ctx.chunkBytes, esz, [&](int vb) { return rhd::evenOffset(a.count, n, vb) * esz; });
  const auto whole = b.pieces(0, bytes, 0, p);
  const int v = rd::virtualRank(r, n);
  if (v < 0) {  // folded away: hand everything to the odd partner, get the result back
    for (const ChunkSpan& c : whole) b.send(r + 1, in, c, false);
    recvInto(b, r + 1, out, whole);
    return;
  }
  const char* cur0 = in;
  if (r < 2 * rem) {
    foldIn(b, r - 1, in, out, whole);
    cur0 = out;
  }
  halving(b, v, n, cur0, out, a.op == collieAvg, [&](ChunkSpan c) { return out + c.off; });
  doubling(b, v, n, out);
  if (r < 2 * rem)
    for (const ChunkSpan& c : whole) b.send(r - 1, out, c, true);
}

// ReduceScatter and AllGather: the two halves of the AllReduce over the real ranks' blocks of
// bb_ bytes (a folded pair stands for two blocks).
class BlockHalves {
 public:
  BlockHalves(const CollArgs& a, const AlgoContext& ctx, ChunkSchedule* s)
      : s_(s),
        n_(ctx.nranks),
        r_(ctx.rank),
        rem_(rd::remainder(n_)),
        p_(rd::largestPow2(n_)),
        v_(rd::virtualRank(r_, n_)),
        bb_(a.count * dtypeSize(a.dtype)),
        total_(bb_ * n_),
        mine_(static_cast<size_t>(r_) * bb_),
        in_(static_cast<const char*>(a.send)),
        out_(static_cast<char*>(a.recv)),
        b_(
            s, ctx.chunkBytes, dtypeSize(a.dtype),
            [n = n_, bb = bb_](int vb) { return rhd::rankStart(vb, n) * bb; }, bb_) {}

  void reduceScatter(bool avg, std::vector<char>* acc) {
    if (v_ < 0) {
      for (const ChunkSpan& c : all()) b_.send(r_ + 1, in_, c, false);
      std::vector<ChunkSpan> own = b_.pieces(mine_, mine_ + bb_, 0, p_);
      for (ChunkSpan& c : own) c.off -= mine_;  // straight into the output
      recvInto(b_, r_ + 1, out_, own);
      return;
    }
    if (acc->size() < total_) acc->resize(total_);
    char* work = acc->data();
    const char* cur0 = in_;
    if (r_ < 2 * rem_) {
      foldIn(b_, r_ - 1, in_, work, all());
      cur0 = work;
    }
    // The last step's pieces of the own block go to the output; a folded partner's stay in work.
    halving(b_, v_, n_, cur0, work, avg, [&](ChunkSpan c) {
      return c.off >= mine_ && c.off < mine_ + bb_ ? out_ + (c.off - mine_) : work + c.off;
    });
    if (r_ < 2 * rem_) {
      const size_t theirs = mine_ - bb_;
      for (const ChunkSpan& c : b_.pieces(theirs, mine_, 0, p_)) b_.send(r_ - 1, work, c, true);
    }
  }

  void allGather() {
    s_->copiesFirst.push_back({out_ + mine_, in_, bb_});
    if (v_ < 0) {
      for (const ChunkSpan& c : b_.pieces(mine_, mine_ + bb_, 0, p_)) {
        ScheduleSend x;
        x.peer = r_ + 1;
        x.src = in_ + (c.off - mine_);
        x.bytes = c.bytes;
        s_->sends.push_back(x);
      }
      recvInto(b_, r_ + 1, out_, allButOwn(mine_));
      return;
    }
    if (r_ < 2 * rem_) recvInto(b_, r_ - 1, out_, b_.pieces(mine_ - bb_, mine_, 0, p_));
    doubling(b_, v_, n_, out_);
    if (r_ < 2 * rem_)
      for (const ChunkSpan& c : allButOwn(mine_ - bb_)) b_.send(r_ - 1, out_, c, true);
  }

 private:
  std::vector<ChunkSpan> all() const { return b_.pieces(0, total_, 0, p_); }
  // The even rank of a folded pair already holds its own block: the rest comes back.
  std::vector<ChunkSpan> allButOwn(size_t own) const {
    std::vector<ChunkSpan> ps = b_.pieces(0, own, 0, p_), hi = b_.pieces(own + bb_, total_, 0, p_);
    ps.insert(ps.end(), hi.begin(), hi.end());
    return ps;
  }

  ChunkSchedule* s_;
  const int n_, r_, rem_, p_, v_;
  const size_t bb_, total_, mine_;
  const char* in_;
  char* out_;
  Builder b_;
};

class RhdAlgorithm : public Algorithm {
 public:
  const char* name() const override { return "rhd"; }
  uint8_t id() const override { return kRhdId; }
  bool supports(Collective coll, MemoryKind kind) const override {
    return kind == MemoryKind::kHost &&
           (coll == Collective::kAllReduce || coll == Collective::kReduceScatter ||
            coll == Collective::kAllGather);
  }
  double costUs(const CollArgs& a, int n, const LinkModel& link) const override {
    if (n <= 1) return 0;
    const double us = 1.0 / (link.betaGBps * 1e3), red = 1.0 / (link.reduceGBps * 1e3);
    const double steps = rhd::numSteps(n), p = rd::largestPow2(n);
    const bool fold = rd::remainder(n) > 0;
    if (a.coll == Collective::kAllReduce) {
      const double bytes = static_cast<double>(argBytes(a));
      // Halving and doubling move (p-1)/p of the buffer each; the fold and unfold all of it.
      // Each step changes partner, and its first bytes share the links with the previous
      // step's last (sent means buffered, not delivered): kStepEfficiency discounts the rate,
      // so that the ring stays the pick where it measures faster.
      double t =
          2 * steps * link.alphaUs + 2 * bytes * (p - 1) / p * us / kStepEfficiency + bytes * red;
      if (fold) t += 2 * (link.alphaUs + bytes * us);
      return t;
    }
    // ReduceScatter / AllGather of n blocks of argBytes.
    const double total = static_cast<double>(argBytes(a)) * n;
    double t = steps * link.alphaUs + total * (p - 1) / p * us;
    if (a.coll == Collective::kReduceScatter) t += total * red;
    if (fold) t += link.alphaUs + total * us;
    return t;
  }
  Status run(const CollArgs& a, AlgoContext& ctx) override {
    const size_t bytes = argBytes(a);
    if (ctx.nranks == 1 || a.count == 0) {
      if (bytes > 0 && a.recv != a.send) memcpy(a.recv, a.send, bytes);
      return Status::ok();
    }
    ChunkSchedule s;
    COLLIE_RETURN_IF_ERROR(buildRhdSchedule(a, ctx, &acc_, &s));
    return runChunkSchedule(s, a, ctx, kRhdId);
  }

 private:
  std::vector<char> acc_;  // the full-size working buffer of ReduceScatter
};

}  // namespace

Status buildRhdSchedule(const CollArgs& a, const AlgoContext& ctx, std::vector<char>* acc,
                        ChunkSchedule* s) {
  switch (a.coll) {
    case Collective::kAllReduce:
      allReduce(a, ctx, s);
      return Status::ok();
    case Collective::kReduceScatter:
      BlockHalves(a, ctx, s).reduceScatter(a.op == collieAvg, acc);
      return Status::ok();
    case Collective::kAllGather:
      BlockHalves(a, ctx, s).allGather();
      return Status::ok();
    default:
      return internalError(std::string("rhd has no schedule for ") + collectiveName(a.coll));
  }
}

std::unique_ptr<Algorithm> makeRhdAlgorithm() { return std::make_unique<RhdAlgorithm>(); }

}  // namespace collie
