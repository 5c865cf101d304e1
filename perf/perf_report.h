// What collie-perf prints: the nccl-tests header, result table and footer, and the CSV rows.
//
// The text layout (column widths, units, number formatting) is the one nccl-tests prints, so
// scripts that parse all_reduce_perf output read collie-perf output unchanged.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "perf/perf_options.h"
#include "perf/perf_results.h"

namespace collie::perf {

// One rank of the run, as the "#  Rank ..." lines show it.
struct RankInfo {
  int rank;
  int pid;
  std::string host;
};

// Right-aligned in width characters: 2 decimals when they fit, then fewer, then exponent form.
std::string formatNumber(double value, int width);

void printRunHeader(FILE* out, const Options& options, int libraryVersion,
                    const std::vector<RankInfo>& ranks);
// algoColumn: one more column naming the algorithm the library picked (--algo auto); cputime:
// the time columns are named "cputime" (-C 1), as nccl-tests names them.
void printTableHeader(FILE* out, bool algoColumn = false, bool cputime = false);
// "# Algorithm: NAME" and a table header, before each table of --algo NAME|all|auto.
void printAlgorithmHeader(FILE* out, const char* algo, bool algoColumn, bool cputime = false);
// The picked algorithm at the end of a row (before printRowEnd).
void printRowAlgo(FILE* out, const char* algo);

// A table row: the preamble, one body per placement (out-of-place first), the terminator.
void printRowPreamble(FILE* out, size_t bytes, size_t count, const char* type, const char* op,
                      int root);
void printRowBody(FILE* out, double timeUs, double algBw, double busBw, bool checked,
                  int64_t wrong);
void printRowEnd(FILE* out);

// After a repeated run: per size and placement, the min and median time over the sweeps and
// the bus bandwidth of each, as comment lines so that table parsers skip them.
void printRepeatSummary(FILE* out, int sweeps, double busFactor,
                        const std::vector<Result>& results);

void printFooter(FILE* out, const Options& options, int errors, double avgBusBw);

// One CSV row per size and placement; wrong is empty when the check is off.
class CsvWriter {
 public:
  ~CsvWriter();
  bool open(const std::string& path);  // writes the header row
  void writeRow(size_t bytes, size_t count, const char* type, const char* op, bool inPlace,
                double timeUs, double algBw, double busBw, bool checked, int64_t wrong);

 private:
  FILE* file_ = nullptr;
};

}  // namespace collie::perf
