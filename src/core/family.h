// What a communicator and the communicators split from it share: the store init met at, the
// transports and their connections (a child talks on lanes of the same connections), and one
// lock per connection. It goes with the last communicator of the family.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/core/bootstrap/rendezvous.h"
#include "transports/registry.h"

namespace collie {

struct Family {
  ~Family();
  Rendezvous rv;
  std::unique_ptr<TransportMesh> mesh;
  // By family rank: held by whichever thread moves that connection or any of its lanes. A thread
  // waiting on a shared connection waits for the lock only for one progress call, never for
  // another communicator's whole op: each moves every lane's frames.
  // Connections of one transport that share its state (ucx: one worker) share one lock.
  std::vector<std::mutex*> wire;
  std::vector<std::unique_ptr<std::mutex>> locks;  // what wire points to
  // The next lane number this rank proposes (see CommImpl::split).
  std::atomic<uint32_t> nextLane{1};

  // The first failure of a communicator of the family: the others fail at their next call.
  void noteFailure(const Status& s) {
    std::lock_guard<std::mutex> l(failMu);
    if (!failed.load()) firstFailure = s;
    failed.store(true);
  }
  std::atomic<bool> failed{false};
  std::mutex failMu;
  Status firstFailure;  // guarded by failMu
};

// A Store whose keys all begin with prefix: a split communicator's own names in the family's
// store.
class PrefixStore : public Store {
 public:
  PrefixStore(Store* inner, std::string prefix) : inner_(inner), prefix_(std::move(prefix)) {}
  Status set(const std::string& key, const std::string& value) override {
    return inner_->set(prefix_ + key, value);
  }
  StatusOr<std::string> get(const std::string& key, const Deadline& deadline) override {
    return inner_->get(prefix_ + key, deadline);
  }
  StatusOr<int64_t> add(const std::string& key, int64_t delta) override {
    return inner_->add(prefix_ + key, delta);
  }
  Status wait(const std::vector<std::string>& keys, const Deadline& deadline,
              std::vector<std::string>* missing) override;

 private:
  Store* inner_;
  std::string prefix_;
};

}  // namespace collie
