// What a run reports besides the console: the metrics CSV (--metrics) and the loss and
// accuracy curves drawn with gnuplot (--plot), plus the progress bar.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "training_demo/status.h"

namespace collie {
namespace train {

struct MetricsRow {
  int epoch = 0;         // 1-based
  int64_t step = 0;      // global steps done
  double loss = 0;       // mean training loss over the interval
  double accuracy = -1;  // test accuracy (epoch rows), negative: none (written "nan")
  double samplesPerSec = 0;
  double commShare = 0;  // share of step time spent in Collie calls
};

// The CSV: header "epoch,step,loss,accuracy,samples_per_s,comm_wait"; each row is flushed,
// so the file shows progress while training runs. A resumed run appends.
class MetricsCsv {
 public:
  MetricsCsv() = default;
  ~MetricsCsv();
  MetricsCsv(const MetricsCsv&) = delete;
  MetricsCsv& operator=(const MetricsCsv&) = delete;
  Status open(const std::string& path, bool append);
  void write(const MetricsRow& row);

 private:
  FILE* f_ = nullptr;
};

// The full path of gnuplot, or "" when it is not on PATH.
std::string findGnuplot();
// An error that says how to install gnuplot when it is not on PATH.
Status requireGnuplot();

// Loss (per logged interval, by step) and test accuracy (per epoch) as a PNG of two panels.
Status plotCurves(const std::string& png, const std::vector<MetricsRow>& steps,
                  const std::vector<MetricsRow>& epochs);

// A one-line progress bar on stderr, redrawn at most ten times a second.
class ProgressBar {
 public:
  ProgressBar(bool enabled, int epoch, int epochs, size_t total);
  void update(size_t done, double loss, double samplesPerSec);
  void finish();

 private:
  bool enabled_;
  int epoch_, epochs_;
  size_t total_;
  double lastDraw_ = -1;
};

}  // namespace train
}  // namespace collie
