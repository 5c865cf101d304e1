// Command line of collie-run: what to launch and how, parsed and checked before anything starts.
#pragma once

#include <string>
#include <vector>

namespace collie {

constexpr int kRunUsageError = 2;             // exit code for a bad command line
constexpr int kRunMaxRanks = 4096;            // ranks on one node
constexpr int kRunMaxWorld = 1 << 20;         // ranks of the whole job
constexpr int kRunDefaultMasterPort = 29500;  // across nodes, as torchrun

struct RunOptions {
  int nranks = 1;  // ranks on this node (-n, --nproc-per-node)
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr;  // "" on one node: 127.0.0.1
  bool tag_output = false;
  double timeout_s = 0;  // 0: no limit
  int port = 0;          // 0: pick a free one (one node only)
  // The program and its arguments, null-terminated; they point into main's argv.
  std::vector<char*> argv;

  int worldSize() const { return nnodes * nranks; }
  int globalRank(int local) const { return node_rank * nranks + local; }
};

// Fills *opt from main's arguments. Returns -1 when the launch should proceed, otherwise the
// exit code: 0 after printing the usage text for -h/--help, kRunUsageError after a message on
// stderr.
int parseRunArgs(int argc, char** argv, RunOptions* opt);

}  // namespace collie
