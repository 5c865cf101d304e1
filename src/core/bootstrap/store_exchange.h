// The transports' AddressExchange over a communicator's Store.
#pragma once

#include "src/core/bootstrap/store.h"
#include "transports/transport.h"

namespace collie {

class StoreExchange : public AddressExchange {
 public:
  StoreExchange(Store* store, int rank) : store_(store), rank_(rank) {}
  Status publish(const std::string& key, const std::string& value) override;
  Status collect(const std::string& key, const std::vector<int>& ranks, const Deadline& deadline,
                 std::vector<std::string>* values) override;

 private:
  // Each rank's value lives at "x/<key>/<rank>", apart from the communicator's own keys.
  static std::string keyOf(const std::string& key, int rank);
  Store* store_;
  int rank_;
};

}  // namespace collie
