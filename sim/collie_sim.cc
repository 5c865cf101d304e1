// collie-sim: predicted AllReduce time and bus bandwidth per algorithm and size, from each
// algorithm's real schedule run through the event model of links (sim/event_sim.h), for
// machines larger than any test bench, e.g.
//
//   collie-sim --ranks 1024 --hosts 128 --net-gbps 25 --net-us 5 --shm-gbps 100 -b 8 -e 1G
//
// Prints one row per size with each algorithm's time and busbw (nccl-tests' 2(n-1)/n factor)
// and the fastest one; --csv writes the same rows to a file. A first word names another
// collective (reduce_scatter, all_gather, broadcast, reduce), as for collie-perf.
#include <getopt.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sim/predict.h"

namespace collie {
namespace sim {
namespace {

struct CliOptions {
  Collective coll = Collective::kAllReduce;
  Topology topo{8, 1};
  Links links;
  PredictOptions predict;
  size_t minBytes = 8, maxBytes = 64u << 20;
  long factor = 2;
  std::vector<const SimAlgorithm*> algos;
  std::string csv;
};

// The schedules grow with the square of the ranks (see --ranks).
constexpr long kMaxRanks = 4096;

void usage(FILE* out) {
  fprintf(
      out,
      "usage: collie-sim [all_reduce|reduce_scatter|all_gather|broadcast|reduce] [options]\n"
      "  --ranks N         ranks (default 8, at most %ld: a ring's schedule has 2(n-1) steps\n"
      "                    for each of n ranks, 2.5 GB of memory at %ld)\n"
      "  --hosts H         hosts; ranks sit on them in contiguous blocks (default 1)\n"
      "  --net-gbps G      NIC bandwidth per host and direction, GB/s (default 25)\n"
      "  --net-us A        network latency per message, us (default 5)\n"
      "  --shm-gbps G      shared-memory copy bandwidth per rank and direction, GB/s;\n"
      "                    0: ranks of a host talk at the network's rates (default 100)\n"
      "  --shm-us A        shared-memory latency per message, us (default 1)\n"
      "  --reduce-gbps G   reduction speed per rank, GB/s; 0: free (default 0)\n"
      "  --cores C         cores per host shared by its local copies and reductions;\n"
      "                    0: one per rank (default 0)\n"
      "  --flow-cores W    cores one local flow at full rate keeps busy, 1 to 2 (default 2)\n"
      "  --switch-loss F   part of its cores' time a host with more busy ranks than cores loses\n"
      "                    to switching between them, 0 to 1 (default 0)\n"
      "  --cache BYTES     cache per rank: local copies and reductions slow down once a\n"
      "                    rank's working set outgrows it; 0: no memory tier (default 0)\n"
      "  --mem-slowdown F  their cost from memory over their cost in cache (default 1)\n"
      "  --shared-cache BYTES  last-level cache per host, shared by its ranks: past their own\n"
      "                    cache, the part of the host's working set it holds comes from\n"
      "                    there; 0: none, it all comes from memory (default 0)\n"
      "  --shared-slowdown F  its cost over the own cache's (default 1)\n"
      "  --local-buffer BYTES  what a local connection holds in flight per direction (a\n"
      "                    shared-memory ring: COLLIE_SHM_RING_BYTES); 0: any message whole\n"
      "                    (default 0)\n"
      "  --chunk BYTES     ring pipeline chunk (default 512K, as COLLIE_CHUNK_BYTES)\n"
      "  --elem BYTES      element size (default 4)\n"
      "  -b, -e BYTES      smallest and largest size (default 8, 64M; K, M, G suffixes)\n"
      "  -f F              size step factor (default 2)\n"
      "  -a A[,A...]       algorithms (default all:",
      kMaxRanks, kMaxRanks);
  for (const SimAlgorithm& a : simAlgorithms()) fprintf(out, " %s", a.name);
  fprintf(out,
          ")\n"
          "  --csv PATH        also write size,algo,time_us,busbw rows to PATH\n");
}

bool parseSize(const char* text, size_t* out) {
  errno = 0;
  char* end = nullptr;
  double v = strtod(text, &end);
  if (end == text || errno != 0 || !std::isfinite(v) || v < 0) return false;
  double unit = 1;
  if (*end == 'k' || *end == 'K')
    unit = 1024.0, ++end;
  else if (*end == 'm' || *end == 'M')
    unit = 1024.0 * 1024, ++end;
  else if (*end == 'g' || *end == 'G')
    unit = 1024.0 * 1024 * 1024, ++end;
  if (*end == 'b' || *end == 'B') ++end;
  if (*end != '\0' || v * unit >= 1e18) return false;
  *out = static_cast<size_t>(v * unit);
  return true;
}

// A size (as parseSize reads it) into a byte count the model holds as a double.
bool parseBytes(const char* text, double* out) {
  size_t v = 0;
  if (!parseSize(text, &v)) return false;
  *out = static_cast<double>(v);
  return true;
}

bool parseDouble(const char* text, double* out) {
  errno = 0;
  char* end = nullptr;
  double v = strtod(text, &end);
  if (end == text || *end != '\0' || errno != 0 || !std::isfinite(v) || v < 0) return false;
  *out = v;
  return true;
}

bool parseLong(const char* text, long lo, long hi, long* out) {
  errno = 0;
  char* end = nullptr;
  long v = strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool parseAlgos(const std::string& list, std::vector<const SimAlgorithm*>* out) {
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t e = list.find(',', pos);
    if (e == std::string::npos) e = list.size();
    std::string name = list.substr(pos, e - pos);
    const SimAlgorithm* a = findSimAlgorithm(name);
    if (a == nullptr) {
      fprintf(stderr, "collie-sim: no schedule for algorithm '%s'\n", name.c_str());
      return false;
    }
    out->push_back(a);
    pos = e + 1;
  }
  return true;
}

// parseLong into a field of another integer type.
template <typename Int>
bool parseInt(const char* text, long lo, long hi, Int* out) {
  long v = 0;
  if (!parseLong(text, lo, hi, &v)) return false;
  *out = static_cast<Int>(v);
  return true;
}

// A bandwidth must be above 0; a slowdown factor at least 1.
bool parsePositive(const char* text, double* out) { return parseDouble(text, out) && *out > 0; }
bool parseAtLeastOne(const char* text, double* out) { return parseDouble(text, out) && *out >= 1; }

// One flag: its long name, its short letter (0: none) and what it does with its value (false: a
// bad value).
struct FlagSpec {
  const char* name;
  char letter;
  bool (*apply)(const char* value, CliOptions* o);
};

const FlagSpec kFlags[] = {
    {"ranks", 0,
     [](const char* v, CliOptions* o) { return parseInt(v, 1, kMaxRanks, &o->topo.nranks); }},
    {"hosts", 0,
     [](const char* v, CliOptions* o) { return parseInt(v, 1, 1 << 20, &o->topo.hosts); }},
    {"net-gbps", 0,
     [](const char* v, CliOptions* o) { return parsePositive(v, &o->links.net.gbps); }},
    {"net-us", 0,
     [](const char* v, CliOptions* o) { return parseDouble(v, &o->links.net.alphaUs); }},
    {"shm-gbps", 0,
     [](const char* v, CliOptions* o) { return parseDouble(v, &o->links.shm.gbps); }},
    {"shm-us", 0,
     [](const char* v, CliOptions* o) { return parseDouble(v, &o->links.shm.alphaUs); }},
    {"reduce-gbps", 0,
     [](const char* v, CliOptions* o) { return parseDouble(v, &o->links.reduceGBps); }},
    {"cores", 0,
     [](const char* v, CliOptions* o) { return parseInt(v, 0, 1 << 20, &o->links.cores); }},
    {"flow-cores", 0,
     [](const char* v, CliOptions* o) {
       return parseDouble(v, &o->links.flowCores) && o->links.flowCores >= 1 &&
              o->links.flowCores <= 2;
     }},
    {"switch-loss", 0,
     [](const char* v, CliOptions* o) {
       return parseDouble(v, &o->links.switchLoss) && o->links.switchLoss >= 0 &&
              o->links.switchLoss < 1;
     }},
    {"cache", 0, [](const char* v, CliOptions* o) { return parseBytes(v, &o->links.cacheBytes); }},
    {"mem-slowdown", 0,
     [](const char* v, CliOptions* o) { return parseAtLeastOne(v, &o->links.memSlowdown); }},
    {"shared-cache", 0,
     [](const char* v, CliOptions* o) { return parseBytes(v, &o->links.sharedCacheBytes); }},
    {"shared-slowdown", 0,
     [](const char* v, CliOptions* o) { return parseAtLeastOne(v, &o->links.sharedSlowdown); }},
    {"local-buffer", 0,
     [](const char* v, CliOptions* o) { return parseBytes(v, &o->links.localBufferBytes); }},
    {"chunk", 0,
     [](const char* v, CliOptions* o) {
       return parseSize(v, &o->predict.chunkBytes) && o->predict.chunkBytes > 0;
     }},
    {"elem", 0,
     [](const char* v, CliOptions* o) { return parseInt(v, 1, 64, &o->predict.elemSize); }},
    {"csv", 0,
     [](const char* v, CliOptions* o) {
       o->csv = v;
       return true;
     }},
    {nullptr, 'b', [](const char* v, CliOptions* o) { return parseSize(v, &o->minBytes); }},
    {nullptr, 'e', [](const char* v, CliOptions* o) { return parseSize(v, &o->maxBytes); }},
    {nullptr, 'f',
     [](const char* v, CliOptions* o) { return parseInt(v, 2, 1 << 20, &o->factor); }},
    {nullptr, 'a', [](const char* v, CliOptions* o) { return parseAlgos(v, &o->algos); }},
};
constexpr int kFirstLong = 1000;  // getopt's value for kFlags[i] is kFirstLong + i

// getopt_long's table for kFlags, with --help.
std::vector<option> longOptions() {
  std::vector<option> out;
  for (size_t i = 0; i < sizeof(kFlags) / sizeof(kFlags[0]); ++i)
    if (kFlags[i].name != nullptr)
      out.push_back({kFlags[i].name, required_argument, nullptr, kFirstLong + static_cast<int>(i)});
  out.push_back({"help", no_argument, nullptr, 'h'});
  out.push_back({nullptr, 0, nullptr, 0});
  return out;
}

const FlagSpec* findFlag(int flag) {
  for (size_t i = 0; i < sizeof(kFlags) / sizeof(kFlags[0]); ++i)
    if (flag == kFirstLong + static_cast<int>(i) || (flag != 0 && flag == kFlags[i].letter))
      return &kFlags[i];
  return nullptr;
}

// The collective, first as in collie-perf; sizes count as nccl-tests counts them. False: an
// unknown word (message printed).
bool parseCollective(int* argc, char*** argv, CliOptions* o) {
  if (*argc <= 1 || (*argv)[1][0] == '-') return true;
  static const struct {
    const char* name;
    Collective coll;
  } kColls[] = {{"all_reduce", Collective::kAllReduce},
                {"reduce_scatter", Collective::kReduceScatter},
                {"all_gather", Collective::kAllGather},
                {"broadcast", Collective::kBroadcast},
                {"reduce", Collective::kReduce}};
  const char* word = (*argv)[1];
  bool found = false;
  for (const auto& c : kColls)
    if (strcmp(word, c.name) == 0) o->coll = c.coll, found = true;
  if (!found) {
    fprintf(stderr, "collie-sim: unknown collective '%s'\n", word);
    return false;
  }
  ++*argv;
  --*argc;
  return true;
}

// Cross-flag rules, and the default algorithms; false: bad usage (message printed).
bool finishOptions(CliOptions* o) {
  if (o->topo.hosts > o->topo.nranks) {
    fprintf(stderr, "collie-sim: %d hosts for %d ranks\n", o->topo.hosts, o->topo.nranks);
    return false;
  }
  if (o->minBytes > o->maxBytes) {
    fprintf(stderr, "collie-sim: -b is above -e\n");
    return false;
  }
  if (o->algos.empty()) {
    for (const SimAlgorithm& a : simAlgorithms())
      if (a.supports(o->coll)) o->algos.push_back(&a);
  }
  for (const SimAlgorithm* a : o->algos) {
    if (!a->supports(o->coll)) {
      fprintf(stderr, "collie-sim: %s has no schedule for %s\n", a->name, collectiveName(o->coll));
      return false;
    }
  }
  return true;
}

// 0: run; 1: help printed; 2: bad usage (message printed).
int parseArgs(int argc, char** argv, CliOptions* o) {
  static const std::vector<option> kLong = longOptions();
  if (!parseCollective(&argc, &argv, o)) return 2;
  int flag;
  while ((flag = getopt_long(argc, argv, "+b:e:f:a:h", kLong.data(), nullptr)) != -1) {
    if (flag == 'h') {
      usage(stdout);
      return 1;
    }
    const FlagSpec* spec = findFlag(flag);
    if (spec == nullptr) {
      usage(stderr);
      return 2;
    }
    if (!spec->apply(optarg, o)) {
      const bool ranks = spec->name != nullptr && strcmp(spec->name, "ranks") == 0;
      fprintf(stderr, "collie-sim: bad value '%s'%s\n", optarg,
              ranks ? (" for --ranks (1 to " + std::to_string(kMaxRanks) + ")").c_str() : "");
      return 2;
    }
  }
  if (optind != argc) {
    fprintf(stderr, "collie-sim: unexpected argument '%s'\n", argv[optind]);
    return 2;
  }
  return finishOptions(o) ? 0 : 2;
}

void printHeader(const CliOptions& o) {
  const Topology& t = o.topo;
  const Links& l = o.links;
  printf("# collie-sim: %s, %d ranks on %d hosts (%.3g per host)\n", collectiveName(o.coll),
         t.nranks, t.hosts, static_cast<double>(t.nranks) / t.hosts);
  printf("# net %g GB/s per NIC and direction, %g us; ", l.net.gbps, l.net.alphaUs);
  if (l.shm.gbps > 0)
    printf("shm %g GB/s per rank, %g us; ", l.shm.gbps, l.shm.alphaUs);
  else
    printf("no shm tier; ");
  if (l.reduceGBps > 0)
    printf("reduce %g GB/s; ", l.reduceGBps);
  else
    printf("reduce free; ");
  if (l.cores > 0)
    printf("%d cores per host, %g per local flow, %g lost to switching with more busy ranks; ",
           l.cores, l.flowCores, l.switchLoss);
  if (l.cacheBytes > 0) printf("cache %.0f B, memory %gx slower; ", l.cacheBytes, l.memSlowdown);
  if (l.cacheBytes > 0 && l.sharedCacheBytes > 0)
    printf("shared cache %.0f B, %gx slower; ", l.sharedCacheBytes, l.sharedSlowdown);
  if (l.localBufferBytes > 0) printf("local buffer %.0f B; ", l.localBufferBytes);
  printf("chunk %zu B; elements of %zu B\n#\n", o.predict.chunkBytes, o.predict.elemSize);
  printf("# %12s", "size(B)");
  for (const SimAlgorithm* a : o.algos) printf("  %24s", a->name);
  printf("  %s\n# %12s", "fastest", "");
  for (size_t i = 0; i < o.algos.size(); ++i) printf("  %13s %10s", "time(us)", "busbw");
  printf("\n");
}

int run(const CliOptions& o) {
  FILE* csv = nullptr;
  if (!o.csv.empty()) {
    csv = fopen(o.csv.c_str(), "w");
    if (csv == nullptr) {
      fprintf(stderr, "collie-sim: cannot write %s: %s\n", o.csv.c_str(), strerror(errno));
      return 1;
    }
    fprintf(csv, "size,algo,time_us,busbw\n");
  }
  printHeader(o);
  for (size_t size = o.minBytes;;) {
    printf("  %12zu", size);
    const char* best = "-";
    double bestUs = 0;
    for (const SimAlgorithm* a : o.algos) {
      SimResult r = predict(*a, o.coll, size, o.topo, o.links, o.predict);
      if (!r.ok) {
        fprintf(stderr, "collie-sim: %s at %zu B: %s\n", a->name, size, r.error.c_str());
        if (csv) fclose(csv);
        return 1;
      }
      double bus = busGBps(o.coll, size, o.topo.nranks, r.timeUs);
      printf("  %13.2f %10.3f", r.timeUs, bus);
      if (csv) fprintf(csv, "%zu,%s,%.3f,%.6f\n", size, a->name, r.timeUs, bus);
      if (best[0] == '-' || r.timeUs < bestUs) best = a->name, bestUs = r.timeUs;
    }
    printf("  %s\n", best);
    fflush(stdout);
    size_t next = size == 0 ? 1 : size * static_cast<size_t>(o.factor);
    if (next <= size || next > o.maxBytes) break;
    size = next;
  }
  if (csv) fclose(csv);
  return 0;
}

}  // namespace
}  // namespace sim
}  // namespace collie

int main(int argc, char** argv) {
  collie::sim::CliOptions o;
  int parsed = collie::sim::parseArgs(argc, argv, &o);
  if (parsed != 0) return parsed == 1 ? 0 : 2;
  return collie::sim::run(o);
}
