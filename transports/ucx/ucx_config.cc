// Collie's UCX defaults, and the context made with them.
#include "transports/ucx/ucx_config.h"

#include <cstdio>
#include <cstdlib>

#include "src/base/log.h"

namespace collie {

namespace {

// tcp: UCX reads a rendezvous message's data through receive segments of RX_SEG_SIZE, each a
// recv call and a progress round, then copies it into the caller's buffer. Segments the size of
// a pipeline chunk (COLLIE_CHUNK_BYTES, 512 KiB) take a frame in one or two reads; UCX 1.13's
// 64 KiB cost most of the link (README, Performance notes).
constexpr UcxDefault kDefaults[] = {
    {"tcp", "RX_SEG_SIZE", "UCX_TCP_RX_SEG_SIZE", "512k"},
};

const char* systemLookup(const char* name) { return getenv(name); }

}  // namespace

std::string ucxTransportOf(const std::string& resource) {
  return resource.substr(0, resource.find('/'));
}

std::vector<UcxDefault> ucxDefaults(const std::vector<std::string>& transports,
                                    const char* (*lookup)(const char*)) {
  std::vector<UcxDefault> out;
  for (const UcxDefault& d : kDefaults) {
    bool used = false;
    for (const std::string& t : transports) used |= t == d.transport;
    if (used && lookup(d.env) == nullptr) out.push_back(d);
  }
  return out;
}

std::vector<std::string> ucxResources(const UcxApi* api, ucp_context_h context) {
  // UCX has no query for the resources a context selected, but prints them, one per line:
  //   "#      resource 1  :  md 1  dev 1  flags -- tcp/eth0"
  char* text = nullptr;
  size_t size = 0;
  FILE* f = open_memstream(&text, &size);
  if (f == nullptr) return {};
  api->contextPrintInfo(context, f);
  fclose(f);
  std::string all(text, size);
  free(text);
  std::vector<std::string> out;
  for (size_t pos = 0; pos < all.size();) {
    size_t end = all.find('\n', pos);
    if (end == std::string::npos) end = all.size();
    const std::string line = all.substr(pos, end - pos);
    pos = end + 1;
    const size_t dash = line.find("-- ");
    if (line.find("resource") == std::string::npos || dash == std::string::npos) continue;
    std::string res = line.substr(dash + 3);
    res.erase(res.find_last_not_of(" \t") + 1);
    out.push_back(res);
  }
  return out;
}

ucs_status_t ucxInit(const UcxApi* api, const ucp_params_t& params, ucp_context_h* context,
                     std::vector<std::string>* resources) {
  ucp_config_t* config = nullptr;
  ucs_status_t st = api->configRead(nullptr, nullptr, &config);
  if (st != UCS_OK) return st;
  st = api->initVersion(UCP_API_MAJOR, UCP_API_MINOR, &params, config, context);
  if (st == UCS_OK) {
    *resources = ucxResources(api, *context);
    std::vector<std::string> transports;
    for (const std::string& r : *resources) transports.push_back(ucxTransportOf(r));
    const std::vector<UcxDefault> ds = ucxDefaults(transports, &systemLookup);
    // The transports are known only once a context has chosen them: it is made again with
    // the defaults (well under a millisecond). A default UCX refuses is left out.
    for (const UcxDefault& d : ds)
      if (api->configModify(config, d.field, d.value) != UCS_OK)
        COLLIE_INFO(kLogInit, "UCX refused the default %s=%s", d.env, d.value);
    if (!ds.empty()) {
      api->cleanup(*context);
      st = api->initVersion(UCP_API_MAJOR, UCP_API_MINOR, &params, config, context);
    }
  }
  api->configRelease(config);
  if (st != UCS_OK) *context = nullptr;
  return st;
}

}  // namespace collie
