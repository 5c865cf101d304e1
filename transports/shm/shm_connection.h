// A connection to a peer on this host: a stream connection over the shared-memory rings, with
// the staging buffers' flag slots and the peer's memory as its optional capabilities.
#pragma once

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
                std::unique_ptr<ShmMailbox> mail)
      : StreamConnection(peer, commId, std::move(streams), opt, peerBuf, localBuf, bufBytes),
        slots_(std::move(slots)),
        memory_(std::move(memory)),
        mail_(std::move(mail)) {}
  ShmSlots* shmSlots() override { return slots_.get(); }
  PeerMemory* peerMemory() override { return memory_.get(); }
  // Small point-to-point messages go through the mailbox while it has room.
  Status isend(const void* buf, size_t bytes, const FrameTag& tag, Request* req) override;
  Status progress(bool* progressed) override;

 protected:
  Status drainSideChannel(bool* progressed) override;

 private:
  std::shared_ptr<ShmSlots> slots_;
  std::unique_ptr<PeerMemory> memory_;
  std::unique_ptr<ShmMailbox> mail_;
};

}  // namespace collie
