// Repeated-sweep statistics and the JSON output of collie-perf (see perf_results.h).
#include "perf/perf_results.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace collie::perf {
namespace {

// JSON string body: the names written here are ASCII words, but quote and control characters
// are escaped anyway so that a strange algorithm name cannot break the file.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

void writeResult(FILE* f, const Result& r, double factor) {
  double med = r.medianUs();
  fprintf(f,
          "    {\"bytes\": %zu, \"count\": %zu, \"type\": %s, \"redop\": %s, \"root\": %d, "
          "\"algo\": %s, \"placement\": %s, "
          "\"time_us\": %.3f, \"time_us_min\": %.3f, \"algbw_GBs\": %.9g, \"busbw_GBs\": %.9g, "
          "\"busbw_GBs_max\": %.9g, ",
          r.bytes, r.count, quoted(r.type).c_str(), quoted(r.op).c_str(), r.root,
          quoted(r.table).c_str(), quoted(r.inPlace ? "in-place" : "out-of-place").c_str(), med,
          r.minUs(), bandwidthGBs(r.bytes, med, 1.0), bandwidthGBs(r.bytes, med, factor),
          bandwidthGBs(r.bytes, r.minUs(), factor));
  fprintf(f, "\"times_us\": [");
  for (size_t i = 0; i < r.timesUs.size(); ++i) fprintf(f, "%s%.3f", i ? ", " : "", r.timesUs[i]);
  fprintf(f, "], \"algos\": [");
  for (size_t i = 0; i < r.algos.size(); ++i) {
    fprintf(f, "%s%s", i ? ", " : "", quoted(r.algos[i]).c_str());
  }
  fprintf(f, "], \"wrong\": ");
  if (r.checked) {
    fprintf(f, "%" PRId64 "}", r.wrong);
  } else {
    fprintf(f, "null}");
  }
}

}  // namespace

double Result::minUs() const {
  return timesUs.empty() ? 0.0 : *std::min_element(timesUs.begin(), timesUs.end());
}

double Result::medianUs() const {
  if (timesUs.empty()) return 0.0;
  std::vector<double> sorted = timesUs;
  std::sort(sorted.begin(), sorted.end());
  return sorted[(sorted.size() - 1) / 2];
}

double bandwidthGBs(size_t bytes, double timeUs, double factor) {
  return timeUs > 0 ? static_cast<double>(bytes) * factor / (timeUs * 1.0e3) : 0.0;
}

bool writeJson(const std::string& path, const RunInfo& run, const std::vector<Result>& results) {
  FILE* f = fopen(path.c_str(), "w");
  if (!f) return false;
  fprintf(f,
          "{\n  \"tool\": \"collie-perf\",\n  \"collective\": %s,\n  \"nranks\": %d,\n"
          "  \"algo\": %s,\n  \"transport\": %s,\n  \"repeat\": %d,\n  \"bus_factor\": %.6f,\n"
          "  \"results\": [\n",
          quoted(run.collective).c_str(), run.nranks, quoted(run.algo).c_str(),
          quoted(run.transport).c_str(), run.repeat, run.busFactor);
  for (size_t i = 0; i < results.size(); ++i) {
    writeResult(f, results[i], run.busFactor);
    fprintf(f, "%s\n", i + 1 < results.size() ? "," : "");
  }
  fprintf(f, "  ]\n}\n");
  return fclose(f) == 0;
}

}  // namespace collie::perf
