// Results of collie-perf kept across repeated sweeps: one entry per (datatype, op, size,
// placement) with the time of every sweep, their min and median, and the JSON file of them all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace collie::perf {

struct Result {
  size_t bytes = 0;
  size_t count = 0;
  std::string type;
  std::string op;
  bool inPlace = false;
  bool checked = false;
  int root = -1;
  std::string table;               // the algorithm asked for ("" the library's choice, or auto)
  int64_t wrong = 0;               // the most wrong elements any sweep saw
  std::vector<double> timesUs;     // one per sweep, in sweep order
  std::vector<std::string> algos;  // the algorithm the library reported, per sweep ("" unknown)

  double minUs() const;
  double medianUs() const;  // the lower middle of an even count, so it is a measured time
};

// busbw factor times bytes / time, in GB/s (1e9 B/s).
double bandwidthGBs(size_t bytes, double timeUs, double factor);

// What the JSON file says about the run besides the results.
struct RunInfo {
  std::string collective;
  int nranks = 0;
  std::string algo;       // as asked for ("" = library default)
  std::string transport;  // as asked for ("" = library default)
  int repeat = 1;
  double busFactor = 1;
};

// Writes the whole run as one JSON object; false when the file cannot be written.
bool writeJson(const std::string& path, const RunInfo& run, const std::vector<Result>& results);

}  // namespace collie::perf
