// The failure protocol of a communicator: the first error stays its error; every peer is told
// why; and after a failure a stuck peer may have caused, the peers that stay silent are named.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "transports/abort_link.h"

namespace collie {

class FailureProtocol {
 public:
  // aborting: set by collieCommAbort, which cuts the listening short.
  FailureProtocol(int64_t timeoutMs, const std::atomic<bool>* aborting)
      : timeoutMs_(timeoutMs), aborting_(aborting) {}
  // The connections to tell and to listen to, once init made them.
  void attach(std::vector<AbortLink*> peers) { peers_ = std::move(peers); }

  bool failed() const { return failed_.load(); }
  // Fails the communicator with s and tells every peer why. Returns what this rank reports:
  // s, with the peers that stay silent after it named where a stuck peer may be the cause.
  Status fail(const Status& s);
  // What every op after the failure returns.
  Status failedError();
  Status firstError();
  std::string lastError();
  void setLastError(const std::string& msg);

 private:
  // What a failed op hears in its grace.
  struct Hearing {
    std::vector<int> silent;  // peers that said nothing
    std::vector<int> lost;    // peers whose link closed or broke with no word
    size_t told = 0;          // peers whose transport can tell whether they spoke
    bool cutShort = false;    // collieCommAbort ended it
  };
  // Listens to every peer and pushes what is left of this rank's abort, until it has gone to
  // every peer (forWord: and every peer has spoken), or the grace ends, or abort comes.
  Hearing listen(bool forWord);
  // After a failure a stuck peer may have caused: the peers silent through the grace and those
  // whose links were lost ("" when there are none or none can tell).
  std::string silentPeers();
  int64_t graceMs() const;
  void record(const Status& s, const Status& replaces);

  int64_t timeoutMs_;
  const std::atomic<bool>* aborting_;
  std::vector<AbortLink*> peers_;
  std::atomic<bool> failed_{false};
  std::mutex mu_;
  Status first_;           // guarded by mu_
  std::string lastError_;  // guarded by mu_
};

}  // namespace collie
