// A communicator's settings, read and checked at init, before anything is connected: the
// environment today, a per-communicator config later.
#pragma once

#include <cstdint>
#include <string>

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
};

StatusOr<CommConfig> readCommConfig();

}  // namespace collie
