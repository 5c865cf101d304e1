// DeviceChannels (see device_channels.h).
#include "algorithms/device_channels.h"

#include <string>

namespace collie {
namespace {

constexpr uint8_t kDeviceId = 8;  // goes into the frames' tag, as an algorithm id
constexpr uint32_t kControlTag = 0xD0;

}  // namespace

DeviceChannels::DeviceChannels(const CollArgs& args, const AlgoContext& ctx, const char* what,
                               std::vector<Neighbour> neighbours)
    : ctx_(ctx), what_(what), tag_(ctx.tagFor(args, kControlTag, kDeviceId)) {
  for (const Neighbour& n : neighbours) {
    Peer p;
    p.n = n;
    p.conn = ctx.conns[n.rank];
    p.due = n.in + n.out;  // a ready per message in, a free per message out
    peers_.push_back(p);
  }
}

const DeviceChannels::Peer& DeviceChannels::at(int peer) const {
  for (const Peer& p : peers_)
    if (p.n.rank == peer) return p;
  return peers_.front();  // schedules ask only about their neighbours
}

DeviceChannels::Peer& DeviceChannels::at(int peer) {
  return const_cast<Peer&>(static_cast<const DeviceChannels*>(this)->at(peer));
}

Status DeviceChannels::start() {
  for (Peer& p : peers_) COLLIE_RETURN_IF_ERROR(post(p));
  return Status::ok();
}

Status DeviceChannels::post(Peer& p) {
  if (p.due == 0) return Status::ok();
  --p.due;
  p.req = Request();
  p.posted = true;
  return p.conn->irecv(&p.msg, sizeof(Control), tag_, &p.req);
}

Status DeviceChannels::signal(int peer, uint32_t kind, size_t m) {
  out_.emplace_back();
  out_.back().msg.signal = kind;
  out_.back().msg.message = m;
  return at(peer).conn->isend(&out_.back().msg, sizeof(Control), tag_, &out_.back().req);
}

Status DeviceChannels::take(Peer& p) {
  COLLIE_RETURN_IF_ERROR(p.req.status);
  p.posted = false;
  const Control& m = p.msg;
  if (m.zero == 0 && m.signal == kReady && m.message == p.ready && p.ready < p.n.in) {
    ++p.ready;
  } else if (m.zero == 0 && m.signal == kFree && m.message == p.freed && p.freed < p.n.out) {
    ++p.freed;
  } else {
    return invalidArgument(std::string(what_) + ": garbled control frame from rank " +
                           std::to_string(p.n.rank) + " (signal " + std::to_string(m.signal) +
                           ", message " + std::to_string(m.message) + "; expected ready " +
                           std::to_string(p.ready) + " or free " + std::to_string(p.freed) + ")");
  }
  return post(p);
}

Status DeviceChannels::poll(bool* moved) {
  bool progressed = false;
  COLLIE_RETURN_IF_ERROR(ctx_.poller->progressAll(&progressed));
  for (Peer& p : peers_)
    if (p.posted && p.req.done) {
      COLLIE_RETURN_IF_ERROR(take(p));
      *moved = true;
    }
  while (!out_.empty() && out_.front().req.done) {
    COLLIE_RETURN_IF_ERROR(out_.front().req.status);
    out_.pop_front();
  }
  return Status::ok();
}

Status DeviceChannels::waitForFrame(const char* state) {
  std::vector<Request*> waits;
  for (Peer& p : peers_)
    if (p.posted) waits.push_back(&p.req);
  if (waits.empty())  // every frame is in, so the schedule should have finished
    return internalError(std::string(what_) + ": stalled " + state + " with every frame in");
  return ctx_.poller->progressUntilAny(waits.data(), waits.size(), ctx_.deadline, ctx_.opName);
}

Status DeviceChannels::finish() {
  for (Out& o : out_) COLLIE_RETURN_IF_ERROR(ctx_.poller->wait(&o.req, ctx_.deadline, ctx_.opName));
  out_.clear();
  return Status::ok();
}

}  // namespace collie
