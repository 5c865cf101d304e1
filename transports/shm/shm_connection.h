// A connection to a peer on this host: a stream connection over the shared-memory rings, with
// the staging buffers' flag slots and the peer's memory as its optional capabilities.
#pragma once

#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "transports/shm/shm_mailbox.h"
#include "transports/stream_connection.h"

namespace collie {

class ShmConnection : public StreamConnection {
 public:
  // slots: shared by every connection of this rank; memory: the peer's, through the kernel.
  ShmConnection(int peer, uint64_t commId, std::vector<std::unique_ptr<ByteStream>> streams,
                const StreamOptions& opt, void* peerBuf, void* localBuf, size_t bufBytes,
                std::shared_ptr<ShmSlots> slots, std::unique_ptr<PeerMemory> memory,
                std::unique_ptr<ShmMailbox> mail, bool lend)
      : StreamConnection(peer, commId, std::move(streams), opt, peerBuf, localBuf, bufBytes),
        slots_(std::move(slots)),
        memory_(std::move(memory)),
        mail_(std::move(mail)),
        peerReads_(lend) {
    setP2PPull([this](uint64_t comm, const RendezvousBody& b, char* dst, size_t bytes, uint32_t tag,
                      uint64_t seq,
                      bool* pulled) { return pull(comm, b, dst, bytes, tag, seq, pulled); });
  }
  ShmSlots* shmSlots() override { return slots_.get(); }
  PeerMemory* peerMemory() override { return memory_.get(); }
  // Small point-to-point messages go through the mailbox while it has room; large ones are
  // read by the receiver straight out of this rank's buffer (a rendezvous), where it can.
  Status progress(bool* progressed) override;
  bool hasPending() const override;
  Word listenAfterFailure() override;

 protected:
  Status drainSideChannel(bool* progressed) override;
  Status sendOn(Lane* lane, const void* buf, size_t bytes, const FrameTag& tag,
                Request* req) override;

 private:
  // A send waiting for its receiver to read it (rendezvous).
  struct Lent {
    uint64_t commId;
    FrameTag tag;
    const void* buf;
    size_t bytes;
    Request* req;
  };
  bool lend(uint64_t commId, const void* buf, size_t bytes, const FrameTag& tag, Request* req);
  Status pull(uint64_t commId, const RendezvousBody& b, char* dst, size_t bytes, uint32_t tag,
              uint64_t seq, bool* pulled);
  Status answer(const FrameHeader& h);  // a receiver's kP2PFinished or kP2PRefused
  void tell(uint8_t what, uint64_t commId, uint32_t tag, uint64_t seq);
  void flushTold();

  std::shared_ptr<ShmSlots> slots_;
  std::unique_ptr<PeerMemory> memory_;
  std::unique_ptr<ShmMailbox> mail_;
  std::vector<Lent> lent_;
  std::deque<FrameHeader> told_;  // answers to the peer's rendezvous the mailbox had no room for
  bool peerReads_;                // lending is on and the peer has refused no message yet
  bool readsPeer_ = false;        // this rank read the peer's memory once already
};

}  // namespace collie
