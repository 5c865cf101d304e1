// A communicator's settings, read and checked at init, before anything is connected: the
// environment, with a collieConfig_t's fields over it for one communicator.
#pragma once

#include <cstdint>
#include <string>

#include "collie/collie.h"
#include "transports/registry.h"

namespace collie {

struct CommConfig {
  int64_t timeoutMs = 300000;  // every wait's deadline
  int64_t connectMs = 300000;  // the rendezvous' and the connections' deadline
  size_t chunkBytes = 512 << 10;
  int tunerTrials = 0;
  int tunerRun = 0;
  double tunerSpan = 4;
  std::string tunerLinks;  // COLLIE_TUNER_LINKS: given link figures ("" measures or defaults)
  bool probeLinks = true;
  int64_t spinUs = 0;
  std::string algorithm;  // COLLIE_ALGO ("" or "auto": the tuner picks)
  std::string backend;    // COLLIE_BACKEND
  AllowedTransports transports;
  TcpOptions tcp;
  ShmOptions shm;
  bool shmShrinkable = true;
  bool blocking = true;      // collieConfig_t.blocking: false returns from init and ops at once
  std::string name;          // collieConfig_t.commName: "" for none
  std::string socketIfname;  // COLLIE_SOCKET_IFNAME: where the TCP transport listens
};

// The environment's settings, with each field of config that is set over its variable (config
// null: the environment alone). A config with a bad header (magic, size, version) or a bad
// field is refused, naming it.
StatusOr<CommConfig> readCommConfig(const collieConfig_t* config = nullptr);

}  // namespace collie
