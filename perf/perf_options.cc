// Flag parsing of collie-perf (see perf_options.h).
//
// Same flags, meanings and defaults as nccl-tests, but a bad value is an error instead of a
// silent fallback, because a benchmark that quietly measured something else is worse than none.
#include "perf/perf_options.h"

#include <getopt.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "perf/perf_collectives.h"
#include "perf/perf_data.h"

namespace collie::perf {
namespace {

enum LongOnly { kCsv = 1000, kJson, kAlgo, kTransport, kProgress, kDevice, kBackend, kRepeat };

// Every option of nccl-tests' *_perf programs (src/common.cu), then collie-perf's own.
const option kLongOptions[] = {
    {"nthreads", required_argument, nullptr, 't'},
    {"ngpus", required_argument, nullptr, 'g'},
    {"minbytes", required_argument, nullptr, 'b'},
    {"maxbytes", required_argument, nullptr, 'e'},
    {"stepbytes", required_argument, nullptr, 'i'},
    {"stepfactor", required_argument, nullptr, 'f'},
    {"iters", required_argument, nullptr, 'n'},
    {"agg_iters", required_argument, nullptr, 'm'},
    {"warmup_iters", required_argument, nullptr, 'w'},
    {"run_cycles", required_argument, nullptr, 'N'},
    {"parallel_init", required_argument, nullptr, 'p'},
    {"check", required_argument, nullptr, 'c'},
    {"op", required_argument, nullptr, 'o'},
    {"datatype", required_argument, nullptr, 'd'},
    {"root", required_argument, nullptr, 'r'},
    {"blocking", required_argument, nullptr, 'z'},
    {"stream_null", required_argument, nullptr, 'y'},
    {"timeout", required_argument, nullptr, 'T'},
    {"cudagraph", required_argument, nullptr, 'G'},
    {"report_cputime", required_argument, nullptr, 'C'},
    {"report_timestamps", required_argument, nullptr, 'S'},
    {"output_file", required_argument, nullptr, 'J'},
    {"average", required_argument, nullptr, 'a'},
    {"local_register", required_argument, nullptr, 'R'},
    {"cta_policy", required_argument, nullptr, 'x'},
    {"device_implementation", required_argument, nullptr, 'D'},
    {"device_cta_count", required_argument, nullptr, 'V'},
    {"memory", required_argument, nullptr, 'M'},
    {"unalign", required_argument, nullptr, 'u'},
    {"per_iter_timing", required_argument, nullptr, 'I'},
    {"per_iter_skip", required_argument, nullptr, 'K'},
    {"csv", required_argument, nullptr, kCsv},
    {"json", required_argument, nullptr, kJson},
    {"algo", required_argument, nullptr, kAlgo},
    {"transport", required_argument, nullptr, kTransport},
    {"repeat", required_argument, nullptr, kRepeat},
    {"progress", required_argument, nullptr, kProgress},
    {"device", no_argument, nullptr, kDevice},
    {"backend", required_argument, nullptr, kBackend},
    {"help", no_argument, nullptr, 'h'},
    {nullptr, 0, nullptr, 0},
};

// '+': stop at the first non-option, so a stray word is reported instead of skipped.
// ':': report a missing value as ':' rather than printing getopt's own message.
const char kShortOptions[] = "+:t:g:b:e:i:f:n:m:w:N:p:I:K:c:o:d:r:z:y:T:G:C:a:R:x:D:V:J:S:M:u:h";

// Sizes take an optional K, M or G suffix (binary units, as nccl-tests) and an optional B.
bool parseSize(const char* text, size_t* out) {
  errno = 0;
  char* end = nullptr;
  double value = strtod(text, &end);
  if (end == text || errno != 0 || !std::isfinite(value) || value < 0) return false;
  double unit = 1;
  switch (*end) {
    case 'k':
    case 'K':
      unit = 1024.0;
      ++end;
      break;
    case 'm':
    case 'M':
      unit = 1024.0 * 1024;
      ++end;
      break;
    case 'g':
    case 'G':
      unit = 1024.0 * 1024 * 1024;
      ++end;
      break;
    default:
      break;
  }
  if (*end == 'b' || *end == 'B') ++end;
  if (*end != '\0') return false;
  double bytes = value * unit;
  if (bytes >= 18446744073709551615.0) return false;
  *out = static_cast<size_t>(bytes);
  return true;
}

bool parseInt(const char* text, long lo, long hi, long* out) {
  errno = 0;
  char* end = nullptr;
  long value = strtol(text, &end, 0);
  if (end == text || *end != '\0' || errno != 0 || value < lo || value > hi) return false;
  *out = value;
  return true;
}

constexpr long kIntMax = 2147483647L;

template <typename T>
bool intFlag(const char* arg, const char* name, long lo, long hi, T* field, std::string* error) {
  long v = 0;
  if (!parseInt(arg, lo, hi, &v)) {
    *error = std::string("invalid value '") + arg + "' for " + name + " (an integer in [" +
             std::to_string(lo) + ", " + std::to_string(hi) + "])";
    return false;
  }
  *field = static_cast<T>(v);
  return true;
}

bool sizeFlag(const char* arg, const char* name, size_t* field, std::string* error) {
  if (parseSize(arg, field)) return true;
  *error = std::string("invalid size '") + arg + "' for " + name + " (e.g. 8, 64K, 1M, 2G)";
  return false;
}

// A word: a file name, an algorithm or a transport list; empty is an error.
bool wordFlag(const char* arg, const char* needs, std::string* field, std::string* error) {
  if (*arg == '\0') {
    *error = needs;
    return false;
  }
  *field = arg;
  return true;
}

// A name that find() knows, or "all" (kAll).
bool nameOrAll(const char* arg, int (*find)(const char*), int* field) {
  if (std::strcmp(arg, "all") == 0) {
    *field = kAll;
    return true;
  }
  *field = find(arg);
  return *field >= 0;
}

bool datatypeFlag(const char* arg, Options* o, std::string* error) {
  if (nameOrAll(arg, findDatatype, &o->datatype)) return true;
  *error = std::string("invalid datatype '") + arg +
           "' (int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, f8e4m3, "
           "f8e5m2, all)";
  return false;
}

bool opFlag(const char* arg, Options* o, std::string* error) {
  if (nameOrAll(arg, findOp, &o->op)) return true;
  *error = std::string("invalid op '") + arg + "' (sum, prod, max, min, avg, all)";
  return false;
}

bool backendFlag(const char* arg, Options* o, std::string* error) {
  if (std::strcmp(arg, "collie") != 0 && std::strcmp(arg, "nccl") != 0) {
    *error = std::string("invalid backend '") + arg + "' (collie, nccl)";
    return false;
  }
  o->backend = arg;
  return true;
}

// The flags of each kind of value, with the field they set.
struct IntFlag {
  int flag;
  const char* name;
  long lo, hi;
  int Options::*field;
};
const IntFlag kIntFlags[] = {
    {'n', "iters", 1, kIntMax, &Options::iters},
    {'m', "agg_iters", 1, kIntMax, &Options::aggIters},
    {'w', "warmup_iters", 0, kIntMax, &Options::warmupIters},
    {'N', "run_cycles", 0, kIntMax, &Options::runCycles},
    {'c', "check", 0, kIntMax, &Options::check},
    {'z', "blocking", 0, 3, &Options::blocking},
    {'r', "root", 0, kIntMax, &Options::root},
    {'a', "average", 0, 3, &Options::average},
    {'T', "timeout", 0, kIntMax / 1000, &Options::timeoutS},
    {'C', "report_cputime", 0, 1, &Options::reportCputime},
    {'t', "nthreads", 1, kIntMax, &Options::nthreads},
    {'g', "ngpus", 1, kIntMax, &Options::ngpus},
    {'p', "parallel_init", 0, 1, &Options::parallelInit},
    {'y', "stream_null", 0, 1, &Options::streamNull},
    {'G', "cudagraph", 0, kIntMax, &Options::cudaGraph},
    {'S', "report_timestamps", 0, 1, &Options::reportTimestamps},
    {'x', "cta_policy", 0, 2, &Options::ctaPolicy},
    {'D', "device_implementation", 0, kIntMax, &Options::deviceImpl},
    {'V', "device_cta_count", 1, 128, &Options::deviceCtaCount},
    {'M', "memory", 0, 1, &Options::memoryReport},
    {'u', "unalign", 0, kIntMax, &Options::unalign},
    {'I', "per_iter_timing", 0, 1, &Options::perIterTiming},
    {'K', "per_iter_skip", 0, kIntMax, &Options::perIterSkip},
    {kRepeat, "repeat", 1, 1000, &Options::repeat},
    {kProgress, "progress", 0, 1, &Options::progress},
};

struct SizeFlag {
  int flag;
  const char* name;
  size_t Options::*field;
};
const SizeFlag kSizeFlags[] = {
    {'b', "minbytes", &Options::minBytes},
    {'e', "maxbytes", &Options::maxBytes},
    {'i', "stepbytes", &Options::stepBytes},
};

struct WordFlag {
  int flag;
  const char* needs;  // the error for an empty word
  std::string Options::*field;
};
const WordFlag kWordFlags[] = {
    {kCsv, "--csv needs a file name", &Options::csvPath},
    {kJson, "--json needs a file name", &Options::jsonPath},
    {kAlgo, "--algo needs an algorithm name", &Options::algo},
    {kTransport, "--transport needs a transport list", &Options::transport},
    {'J', "-J needs a file name", &Options::outputFile},
};

// The flags with a rule of their own: false with *error set when the value is bad.
struct FlagHandler {
  int flag;
  bool (*apply)(const char* arg, Options* o, std::string* error);
};
const FlagHandler kOtherFlags[] = {
    {'f',
     [](const char* arg, Options* o, std::string* error) {
       return intFlag(arg, "stepfactor", 0, 1L << 30, &o->stepFactor, error);
     }},
    // -R is nccl-tests' local_register; a value it refuses may be meant as a sweep count.
    {'R',
     [](const char* arg, Options* o, std::string* error) {
       if (intFlag(arg, "local_register", 0, 2, &o->localRegister, error)) return true;
       *error += "; the number of sweeps is --repeat";
       return false;
     }},
    {'d', datatypeFlag},
    {'o', opFlag},
    {kDevice,
     [](const char*, Options* o, std::string*) {
       o->device = true;
       return true;
     }},
    {kBackend, backendFlag},
};

// Applies one flag; false with *error set when its value is bad.
bool applyFlag(int flag, const char* arg, Options* o, std::string* error) {
  for (const IntFlag& f : kIntFlags)
    if (f.flag == flag) return intFlag(arg, f.name, f.lo, f.hi, &(o->*f.field), error);
  for (const SizeFlag& f : kSizeFlags)
    if (f.flag == flag) return sizeFlag(arg, f.name, &(o->*f.field), error);
  for (const WordFlag& f : kWordFlags)
    if (f.flag == flag) return wordFlag(arg, f.needs, &(o->*f.field), error);
  for (const FlagHandler& h : kOtherFlags)
    if (h.flag == flag) return h.apply(arg, o, error);
  *error = "unhandled option";
  return false;
}

// Cross-flag rules; nccl-tests loops forever or divides by zero on some of these.
bool validate(const Options& o, std::string* error) {
  if (o.minBytes > o.maxBytes) {
    *error = "invalid sizes for 'minbytes' and 'maxbytes': " + std::to_string(o.minBytes) + " > " +
             std::to_string(o.maxBytes);
    return false;
  }
  if (o.stepFactor <= 1 && o.stepBytes == 0 && o.minBytes < o.maxBytes) {
    *error = "stepbytes must be > 0 when stepfactor is 0 or 1";
    return false;
  }
  // --repeat and --algo all print their tables at the end, from every sweep's times.
  if ((o.reportCputime || o.runCycles != 1) && (o.repeat > 1 || o.algo == "all")) {
    *error = std::string(o.reportCputime ? "-C 1" : "-N") +
             " applies to rows printed as they are measured; --repeat above 1 and --algo all "
             "print their tables at the end";
    return false;
  }
  if (o.backend == "nccl" && !o.device) {
    *error = "--backend nccl needs --device (NCCL reduces device buffers only)";
    return false;
  }
  return true;
}

}  // namespace

ParseOutcome parseOptions(int argc, char** argv, Options* o, std::string* error) {
  // An optional leading collective name; getopt then sees it in the program-name slot.
  int first = 0;
  if (argc > 1 && argv[1][0] != '-') {
    std::string name = argv[1];
    const CollDesc* coll = findCollective(name);
    if (coll == nullptr) {
      *error = "collective " + name +
               " is not available in this build (available: " + collectiveNames() + ")";
      return ParseOutcome::kUnavailableCollective;
    }
    o->collective = coll->name;
    first = 1;
  }
  int n = argc - first;
  char** args = argv + first;
  opterr = 0;
  // 0, not 1: glibc then also forgets its place inside the previous call's argument cluster.
  optind = 0;
  for (;;) {
    int flag = getopt_long(n, args, kShortOptions, kLongOptions, nullptr);
    if (flag == -1) break;
    if (flag == 'h') return ParseOutcome::kHelp;
    if (flag == '?') {
      *error = optopt ? std::string("unknown option '-") + static_cast<char>(optopt) + "'"
                      : std::string("unknown option '") + args[optind - 1] + "'";
      return ParseOutcome::kBadUsage;
    }
    if (flag == ':') {
      *error = std::string("option '") + args[optind - 1] + "' needs a value";
      return ParseOutcome::kBadUsage;
    }
    if (!applyFlag(flag, optarg, o, error)) return ParseOutcome::kBadUsage;
  }
  if (optind < n) {
    *error = std::string("unexpected argument '") + args[optind] + "'";
    return ParseOutcome::kBadUsage;
  }
  if (!o->outputFile.empty() && o->jsonPath.empty()) o->jsonPath = o->outputFile;
  return validate(*o, error) ? ParseOutcome::kRun : ParseOutcome::kBadUsage;
}

void printUsage(FILE* out) {
  fprintf(out,
          "USAGE: collie-perf [all_reduce|reduce_scatter|all_gather|broadcast|reduce|sendrecv|"
          "alltoall|gather|scatter]\n"
          "\t[-t,--nthreads <num threads>] [-g,--ngpus <gpus per thread>] (one rank per process: "
          "above 1 noted and ignored; start ranks with collie-run -n)\n"
          "\t[-b,--minbytes <min size in bytes>] (default 32M)\n"
          "\t[-e,--maxbytes <max size in bytes>] (default 32M)\n"
          "\t[-i,--stepbytes <increment size>] (default 1M)\n"
          "\t[-f,--stepfactor <increment factor>] (default 1: step by -i)\n"
          "\t[-n,--iters <iteration count>] (default 20)\n"
          "\t[-m,--agg_iters <aggregated iteration count>] calls per timed iteration, grouped "
          "(default 1)\n"
          "\t[-w,--warmup_iters <warmup iteration count>] (default 5)\n"
          "\t[-N,--run_cycles <cycle count>] run and print the whole table each cycle "
          "(default 1; 0=infinite)\n"
          "\t[-p,--parallel_init <0/1>] (each process inits its own rank; ignored)\n"
          "\t[-c,--check <check iteration count>] (default 1; 0 disables)\n"
          "\t[-o,--op <sum/prod/max/min/avg/all>] (default sum)\n"
          "\t[-d,--datatype "
          "<int8/uint8/int32/uint32/int64/uint64/half/float/double/bfloat16/f8e4m3/f8e5m2/all>]"
          " (default float)\n"
          "\t[-r,--root <root>] (broadcast, reduce, gather and scatter; default 0)\n"
          "\t[-z,--blocking <0/1/2/3> 1=barrier after each iteration, 2=no barrier, 3=barrier "
          "after each iteration, excluded from the time] (default 0)\n"
          "\t[-y,--stream_null <0/1>] [-G,--cudagraph <num graph launches>] (CUDA only; "
          "ignored)\n"
          "\t[-T,--timeout <time in seconds>] deadline of every operation (COLLIE_TIMEOUT_MS; "
          "default 0: the library's)\n"
          "\t[-C,--report_cputime <0/1>] time column: host time spent issuing the calls "
          "(default 0)\n"
          "\t[-S,--report_timestamps <0/1>] [-J,--output_file <file>] (-J writes --json)\n"
          "\t[-a,--average <0/1/2/3> time reported across ranks <0=rank 0/1=avg/2=min/3=max>] "
          "(default 1)\n"
          "\t[-R,--local_register <0/1/2>] [-x,--cta_policy <0/1/2>] "
          "[-D,--device_implementation <n>] [-V,--device_cta_count <n>] [-M,--memory <0/1>] "
          "[-u,--unalign <n>] [-I,--per_iter_timing <0/1>] [-K,--per_iter_skip <n>] "
          "(NCCL and CUDA only; ignored)\n"
          "\t[--csv <file> also write one row per size and placement to file (rank 0)]\n"
          "\t[--json <file> also write every result, with min and median over --repeat, as "
          "JSON]\n"
          "\t[--algo <name|auto|all>] force an algorithm (collieCommSetAlgorithm); auto adds a "
          "column naming the library's pick; all prints one table per algorithm, then auto, "
          "(-a stays --average)\n"
          "\t[--transport <list>] e.g. shm, tcp, ucx, tcp,shm (sets COLLIE_TRANSPORT; -t stays "
          "--nthreads)\n"
          "\t[--repeat <n>] run the whole sweep n times; the table shows the median per size "
          "and a min/median summary follows (default 1)\n"
          "\t[--progress <0/1>] a line per size on stderr (default: on when stdout is not a "
          "terminal or a --csv/--json file is written)\n"
          "\t[--device] CUDA device buffers, on GPU LOCAL_RANK modulo the visible GPUs\n"
          "\t[--backend <collie/nccl>] nccl: device collectives go to NCCL (default collie)\n"
          "\t[-h,--help]\n"
          "Sizes are per-rank totals (nccl-tests): the send vector of reduce_scatter and scatter, "
          "the receive vector of all_gather and gather, either vector of alltoall. busbw factors: "
          "all_reduce 2(n-1)/n; reduce_scatter, all_gather, alltoall, gather and scatter (n-1)/n; "
          "broadcast, reduce and sendrecv 1. sendrecv sends to rank+1 and receives from rank-1 "
          "in one group; in place it is timed but not checked (N/A).\n"
          "Sizes take K, M or G suffixes (binary units). Start ranks with collie-run -n N, or "
          "mpirun / srun.\n");
}

std::vector<std::string> ignoredFlagNotes(const Options& o) {
  struct Note {
    bool given;
    char flag;
    int value;
    const char* why;
  };
  // Even with --device, collie-perf issues plain stream-ordered calls, not graphs or NCCL's
  // registration and device APIs.
  const std::string cpu = o.device ? "no use in collie-perf" : "no meaning on this CPU run";
  const Note notes[] = {
      {o.nthreads != 1, 't', o.nthreads, "one rank per process and thread (collie-run -n)"},
      {o.ngpus != 1, 'g', o.ngpus, "one rank per process, one device per rank (collie-run -n)"},
      {o.parallelInit != 0, 'p', o.parallelInit, "each process inits its own single rank"},
      {o.streamNull != 0, 'y', o.streamNull, "the NULL CUDA stream has {}"},
      {o.cudaGraph != 0, 'G', o.cudaGraph, "CUDA graphs have {}"},
      {o.reportTimestamps != 0, 'S', o.reportTimestamps, "timestamps are not reported"},
      {o.localRegister != 0, 'R', o.localRegister, "NCCL buffer registration has {}"},
      {o.ctaPolicy != -1, 'x', o.ctaPolicy, "NCCL's CTA policy has {}"},
      {o.deviceImpl != 0, 'D', o.deviceImpl, "NCCL device implementations have {}"},
      {o.deviceCtaCount != 16, 'V', o.deviceCtaCount, "NCCL's device CTA count has {}"},
      {o.memoryReport != 0, 'M', o.memoryReport, "the GPU memory report has {}"},
      {o.unalign != 0, 'u', o.unalign, "misaligned buffers are not made"},
      {o.perIterTiming != 0, 'I', o.perIterTiming, "per-iteration CUDA event timing has {}"},
      {o.perIterSkip != 0, 'K', o.perIterSkip, "it applies to -I timing, which has {}"},
  };
  std::vector<std::string> lines;
  for (const Note& n : notes) {
    if (!n.given) continue;
    std::string why = n.why;
    const size_t at = why.find("{}");
    if (at != std::string::npos) why.replace(at, 2, cpu);
    lines.push_back(std::string("# -") + n.flag + " " + std::to_string(n.value) + ": " + why +
                    "; ignored");
  }
  if (!o.outputFile.empty()) {
    lines.push_back("# -J " + o.outputFile + ": written as collie-perf's JSON (--json " +
                    o.jsonPath + ")");
  }
  return lines;
}

}  // namespace collie::perf
