// The default group step of a transport, and AddressExchange's composite call.
#include "transports/transport.h"

namespace collie {

Status AddressExchange::exchange(const std::string& key, const std::string& value,
                                 const std::vector<int>& ranks, const Deadline& deadline,
                                 std::vector<std::string>* values) {
  COLLIE_RETURN_IF_ERROR(publish(key, value));
  return collect(key, ranks, deadline, values);
}

Status Transport::connectGroup(ConnectStep* step, ConnectionTable* conns) {
  std::vector<std::string> theirs;
  COLLIE_RETURN_IF_ERROR(
      step->exchange->exchange(name(), localAddress(), step->peers, step->deadline, &theirs));
  for (size_t i = 0; i < step->peers.size(); ++i) {
    const int p = step->peers[i];
    COLLIE_ASSIGN_OR_RETURN((*conns)[static_cast<size_t>(p)], connect(p, theirs[i]));
  }
  return Status::ok();
}

}  // namespace collie
