// Parsing and checking of collie-run's command line.
#include "tools/collie_run_options.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace collie {
namespace {

void printUsage(FILE* out) {
  std::fputs(
      "usage: collie-run [-n N] [--nnodes NODES --node-rank R --master-addr HOST]\n"
      "                  [--master-port P] [--tag-output] [--timeout SECONDS] [--] PROGRAM "
      "[ARGS...]\n"
      "\n"
      "Starts N local ranks of PROGRAM with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
      "MASTER_ADDR and MASTER_PORT set (other variables are passed on). If a rank exits\n"
      "non-zero or is killed, the others on this node are terminated (SIGTERM, then SIGKILL\n"
      "after 3 s) and collie-run exits with that rank's status (128+S for signal S). SIGINT,\n"
      "SIGTERM and SIGHUP are forwarded to the ranks; a second one kills them.\n"
      "\n"
      "Across hosts, run one collie-run per node with the same --nnodes, -n, --master-addr and\n"
      "--master-port, and --node-rank 0..NODES-1: the job has NODES*N ranks, node R runs ranks\n"
      "R*N..R*N+N-1, and rank 0 (on node 0) serves the store on HOST:P. When a node dies, the\n"
      "ranks of the others fail at their next operation's deadline (COLLIE_TIMEOUT_MS).\n"
      "\n"
      "options:\n"
      "  -n N, -np N, --nproc-per-node N\n"
      "                     ranks on this node (default 1)\n"
      "  --nnodes NODES     nodes in the job (default 1)\n"
      "  --node-rank R      this node's index, 0..NODES-1 (default 0)\n"
      "  --master-addr HOST address of node 0 that every node reaches; needed with NODES > 1\n"
      "                     (default on one node: 127.0.0.1)\n"
      "  --master-port P, --port P\n"
      "                     port rank 0 serves the store on (default: a free port on one node,\n"
      "                     29500 across nodes)\n"
      "  --tag-output       prefix each line the ranks print with [rank] (the global rank)\n"
      "  --timeout SECONDS  terminate the ranks after SECONDS and exit 124 (0: no limit)\n"
      "  -h, --help         show this text\n",
      out);
}

int usageError(const std::string& msg) {
  std::fprintf(stderr, "collie-run: %s (see collie-run --help)\n", msg.c_str());
  return kRunUsageError;
}

bool parseInt(const std::string& s, long lo, long hi, int* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

bool parseSeconds(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  // The upper bound keeps the deadline arithmetic far from overflow.
  if (*end != '\0' || !std::isfinite(v) || v < 0 || v > 1e9) return false;
  *out = v;
  return true;
}

// The options that take a value, each with the rule it checks and the error that names it.
bool applyValue(const std::string& name, const std::string& value, RunOptions* opt,
                std::string* error) {
  const std::string bad = name + " needs ";
  const std::string got = ", not '" + value + "'";
  if (name == "--timeout") {
    if (parseSeconds(value, &opt->timeout_s)) return true;
    *error = bad + "a number of seconds >= 0" + got;
  } else if (name == "--port" || name == "--master-port") {
    if (parseInt(value, 1, 65535, &opt->port)) return true;
    *error = bad + "a port number in 1..65535" + got;
  } else if (name == "--nnodes") {
    if (parseInt(value, 1, kRunMaxWorld, &opt->nnodes)) return true;
    *error = bad + "a node count in 1.." + std::to_string(kRunMaxWorld) + got;
  } else if (name == "--node-rank") {
    if (parseInt(value, 0, kRunMaxWorld - 1, &opt->node_rank)) return true;
    *error = bad + "a node index >= 0" + got;
  } else if (name == "--master-addr") {
    if (!value.empty() && value[0] != '-') {
      opt->master_addr = value;
      return true;
    }
    *error = bad + "the host name or address of node 0" + got;
  } else {
    if (parseInt(value, 1, kRunMaxRanks, &opt->nranks)) return true;
    *error = bad + "a rank count in 1.." + std::to_string(kRunMaxRanks) + got;
  }
  return false;
}

bool isValued(const std::string& name) {
  for (const char* n : {"-n", "-np", "--nproc-per-node", "--timeout", "--port", "--master-port",
                        "--nnodes", "--node-rank", "--master-addr"}) {
    if (name == n) return true;
  }
  return false;
}

// The rules between options: the node index inside the job, node 0's address known to all,
// and a job small enough for the environment bootstrap.
bool checkNodes(const RunOptions& opt, std::string* error) {
  if (opt.node_rank >= opt.nnodes) {
    *error = "--node-rank " + std::to_string(opt.node_rank) + " is out of range for --nnodes " +
             std::to_string(opt.nnodes) + " (0.." + std::to_string(opt.nnodes - 1) + ")";
    return false;
  }
  if (opt.nnodes > 1 && opt.master_addr.empty()) {
    *error = "--nnodes " + std::to_string(opt.nnodes) +
             " needs --master-addr, the address of node 0 that every node reaches";
    return false;
  }
  if (static_cast<long>(opt.nnodes) * opt.nranks > kRunMaxWorld) {
    *error = "--nnodes " + std::to_string(opt.nnodes) + " times -n " + std::to_string(opt.nranks) +
             " is more than " + std::to_string(kRunMaxWorld) + " ranks";
    return false;
  }
  return true;
}

}  // namespace

int parseRunArgs(int argc, char** argv, RunOptions* opt) {
  int i = 1;
  int local_flag = 0;  // -n and --nproc-per-node must agree when both are given
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the program starts here
    if (arg == "-h" || arg == "--help") {
      printUsage(stdout);
      return 0;
    }
    if (arg == "--tag-output") {
      opt->tag_output = true;
      continue;
    }
    std::string name = arg;
    std::string value;
    size_t eq = arg.find('=');
    bool inline_value = arg.compare(0, 2, "--") == 0 && eq != std::string::npos;
    if (inline_value) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    if (!isValued(name)) return usageError("unknown option '" + arg + "'");
    if (!inline_value) {
      if (i + 1 >= argc) return usageError(name + " needs a value");
      value = argv[++i];
    }
    const int before = opt->nranks;
    std::string error;
    if (!applyValue(name, value, opt, &error)) return usageError(error);
    if (name == "-n" || name == "-np" || name == "--nproc-per-node") {
      if (local_flag++ > 0 && before != opt->nranks) {
        return usageError(name + " " + value + " disagrees with the rank count given before (" +
                          std::to_string(before) + ")");
      }
    }
  }
  std::string error;
  if (!checkNodes(*opt, &error)) return usageError(error);
  if (i >= argc) return usageError("no program to run");
  opt->argv.assign(argv + i, argv + argc);
  opt->argv.push_back(nullptr);
  return -1;
}

}  // namespace collie
