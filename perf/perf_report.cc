// Output formatting of collie-perf (see perf_report.h).
#include "perf/perf_report.h"

#include <cinttypes>

#include "collie/collie.h"

namespace collie::perf {

std::string formatNumber(double value, int width) {
  char buf[64];
  // Precision drops until the number fits, so the columns never shift.
  if (snprintf(buf, sizeof(buf), "%*.2f", width, value) <= width) return buf;
  if (snprintf(buf, sizeof(buf), "%*.1f", width, value) <= width) return buf;
  if (snprintf(buf, sizeof(buf), "%*.0f", width, value) <= width) return buf;
  snprintf(buf, sizeof(buf), width >= 7 ? "%*.1e" : "%*.0e", width, value);
  return std::string(buf).substr(0, width);
}

void printRunHeader(FILE* out, const Options& o, int libraryVersion,
                    const std::vector<RankInfo>& ranks) {
  fprintf(out, "# collie-perf version %d.%d.%d collie-headers=%d collie-library=%d\n", COLLIE_MAJOR,
          COLLIE_MINOR, COLLIE_PATCH, COLLIE_VERSION_CODE, libraryVersion);
  fprintf(out, "# Collective test starting: %s\n", o.collective.c_str());
  bool factor = o.stepFactor > 1;
  // One thread and one "device" per process, no graphs or misalignment: what runs, whatever
  // -t, -g, -G or -u asked (the notes below say so).
  fprintf(out,
          "# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
          "agg iters: %d validation: %d graph: 0 unalign: 0\n",
          o.minBytes, o.maxBytes, factor ? static_cast<size_t>(o.stepFactor) : o.stepBytes,
          factor ? "factor" : "bytes", o.warmupIters, o.iters, o.aggIters, o.check);
  for (const std::string& note : ignoredFlagNotes(o)) fprintf(out, "%s\n", note.c_str());
  if (o.timeoutS > 0) {
    fprintf(out, "# -T %d: every operation's deadline (COLLIE_TIMEOUT_MS=%d)\n", o.timeoutS,
            o.timeoutS * 1000);
  }
  if (o.runCycles != 1) fprintf(out, "# Run cycles: %d (0: until stopped)\n", o.runCycles);
  if (o.blocking == 1) fprintf(out, "# Blocking Enabled: barrier after each iteration \n");
  if (o.blocking == 2) fprintf(out, "# Blocking Enabled: wait after each iteration, no barrier \n");
  if (o.blocking == 3) {
    fprintf(out,
            "# Blocking Enabled: wait and barrier after each iteration; time excludes "
            "barrier \n");
  }
  fprintf(out, "#\n");
  fprintf(out, "# Using devices\n");
  for (const RankInfo& r : ranks) {
    fprintf(out, "#  Rank %2d Group %2d Pid %6d on %10s device host\n", r.rank, 0, r.pid,
            r.host.c_str());
  }
}

void printAlgorithmHeader(FILE* out, const char* algo, bool algoColumn, bool cputime) {
  fprintf(out, "#\n# Algorithm: %s%s\n", algo,
          algoColumn ? " (the library's choice per call, named in the last column)" : "");
  printTableHeader(out, algoColumn, cputime);
}

void printRowAlgo(FILE* out, const char* algo) { fprintf(out, "  %s", *algo ? algo : "?"); }

void printTableHeader(FILE* out, bool algoColumn, bool cputime) {
  const char* time = cputime ? "cputime" : "time";
  fprintf(out, "#\n");
  fprintf(out,
          "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place     "
          "     \n",
          "", "", "", "", "");
  fprintf(out, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s%s\n",
          "size", "count", "type", "redop", "root", time, "algbw", "busbw", "#wrong", time, "algbw",
          "busbw", "#wrong", 0, "", algoColumn ? " algo" : "");
  fprintf(out, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)",
          "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "",
          0, "");
}

void printRowPreamble(FILE* out, size_t bytes, size_t count, const char* type, const char* op,
                      int root) {
  fprintf(out, "%12zu  %12zu  %8s  %6s  %6d", bytes, count, type, op, root);
}

void printRowBody(FILE* out, double timeUs, double algBw, double busBw, bool checked,
                  int64_t wrong) {
  std::string time = formatNumber(timeUs, 7);
  std::string alg = formatNumber(algBw, 6);
  std::string bus = formatNumber(busBw, 6);
  if (checked) {
    fprintf(out, "  %7s  %6s  %6s  %6g", time.c_str(), alg.c_str(), bus.c_str(),
            static_cast<double>(wrong));
  } else {
    fprintf(out, "  %7s  %6s  %6s    N/A", time.c_str(), alg.c_str(), bus.c_str());
  }
}

void printRowEnd(FILE* out) { fprintf(out, "\n"); }

void printRepeatSummary(FILE* out, int sweeps, double busFactor,
                        const std::vector<Result>& results) {
  fprintf(out, "#\n# Over %d sweeps (the table above shows medians):\n", sweeps);
  fprintf(out, "# %10s  %8s  %6s  %12s  %9s  %9s  %9s  %9s  %s\n", "size", "type", "redop",
          "placement", "min(us)", "med(us)", "busbw@min", "busbw@med", "algo");
  for (const Result& r : results) {
    double lo = r.minUs(), med = r.medianUs();
    fprintf(out, "# %10zu  %8s  %6s  %12s  %9s  %9s  %9s  %9s  %s\n", r.bytes, r.type.c_str(),
            r.op.c_str(), r.inPlace ? "in-place" : "out-of-place", formatNumber(lo, 9).c_str(),
            formatNumber(med, 9).c_str(),
            formatNumber(bandwidthGBs(r.bytes, lo, busFactor), 9).c_str(),
            formatNumber(bandwidthGBs(r.bytes, med, busFactor), 9).c_str(),
            r.table.empty() ? "-" : r.table.c_str());
  }
}

void printFooter(FILE* out, const Options& o, int errors, double avgBusBw) {
  fprintf(out, "# %-20s : %d %s\n", "Out of bounds values", errors, errors ? "FAILED" : "OK");
  fprintf(out, "# %-20s : %g \n", "Avg bus bandwidth", avgBusBw);
  fprintf(out, "#\n");
  fprintf(out, "# Collective test concluded: %s\n", o.collective.c_str());
  fprintf(out, "#\n");
  fprintf(out, "\n");
}

CsvWriter::~CsvWriter() {
  if (file_) fclose(file_);
}

bool CsvWriter::open(const std::string& path) {
  file_ = fopen(path.c_str(), "w");
  if (!file_) return false;
  fprintf(file_, "size,count,type,redop,placement,time_us,algbw,busbw,wrong\n");
  return true;
}

void CsvWriter::writeRow(size_t bytes, size_t count, const char* type, const char* op, bool inPlace,
                         double timeUs, double algBw, double busBw, bool checked, int64_t wrong) {
  if (!file_) return;
  fprintf(file_, "%zu,%zu,%s,%s,%s,%.3f,%.6f,%.6f,", bytes, count, type, op,
          inPlace ? "in-place" : "out-of-place", timeUs, algBw, busBw);
  if (checked) fprintf(file_, "%" PRId64, wrong);
  fprintf(file_, "\n");
  // Flushed per row so that a run cut short still leaves every finished row on disk.
  fflush(file_);
}

}  // namespace collie::perf
