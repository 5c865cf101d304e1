// HashStore: the in-process store that tests and single-process worlds rendezvous through.
#include <chrono>
#include <cstdlib>

#include "src/core/bootstrap/store.h"

namespace collie {

Status HashStore::set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> l(mu_);
  data_[key] = value;
  cv_.notify_all();
  return Status::ok();
}

StatusOr<std::string> HashStore::get(const std::string& key, const Deadline& deadline) {
  std::unique_lock<std::mutex> l(mu_);
  while (data_.count(key) == 0) {
    if (deadline.expired()) return timeoutError("store: key '" + key + "' never appeared");
    cv_.wait_for(l, std::chrono::milliseconds(deadline.remainingMs(100)));
  }
  return data_[key];
}

StatusOr<int64_t> HashStore::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> l(mu_);
  int64_t v = data_.count(key) ? strtoll(data_[key].c_str(), nullptr, 10) : 0;
  // As the store server: a counter past int64 has no value to answer with.
  if (__builtin_add_overflow(v, delta, &v))
    return invalidArgument("store add overflows the counter '" + key.substr(0, 64) + "'");
  data_[key] = std::to_string(v);
  cv_.notify_all();
  return v;
}

Status HashStore::wait(const std::vector<std::string>& keys, const Deadline& deadline,
                       std::vector<std::string>* missing) {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    std::vector<std::string> miss;
    for (const auto& k : keys)
      if (!data_.count(k)) miss.push_back(k);
    if (miss.empty()) return Status::ok();
    if (deadline.expired()) {
      if (missing) *missing = miss;
      return timeoutError("store: " + std::to_string(miss.size()) + " keys never appeared");
    }
    cv_.wait_for(l, std::chrono::milliseconds(deadline.remainingMs(100)));
  }
}

}  // namespace collie
