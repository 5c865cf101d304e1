// AddressExchange over the Store: one key per rank, waited for together.
#include "src/core/bootstrap/store_exchange.h"

namespace collie {

std::string StoreExchange::keyOf(const std::string& key, int rank) {
  return "x/" + key + "/" + std::to_string(rank);
}

Status StoreExchange::publish(const std::string& key, const std::string& value) {
  return store_->set(keyOf(key, rank_), value);
}

Status StoreExchange::collect(const std::string& key, const std::vector<int>& ranks,
                              const Deadline& deadline, std::vector<std::string>* values) {
  std::vector<std::string> keys;
  for (int r : ranks) keys.push_back(keyOf(key, r));
  COLLIE_RETURN_IF_ERROR(store_->wait(keys, deadline, nullptr));
  values->clear();
  for (const auto& k : keys) {
    COLLIE_ASSIGN_OR_RETURN(std::string v, store_->get(k, deadline));
    values->push_back(std::move(v));
  }
  return Status::ok();
}

}  // namespace collie
