// The measuring loop of collie-perf: for one collective, every (algorithm, datatype, op) table
// over the size sweep, timed, checked, repeated --repeat times, and reported (table, CSV, JSON).
// Only the public C API is used, so it measures what an application would get.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collie/collie.h"
#include "perf/device_memory.h"
#include "perf/perf_collectives.h"
#include "perf/perf_data.h"
#include "perf/perf_options.h"
#include "perf/perf_report.h"
#include "perf/perf_results.h"

namespace collie::perf {

// Every algorithm name collie-perf tries for --algo all; those a build or a collective lacks
// are skipped with a line saying so.
extern const char* const kKnownAlgorithms[];
extern const int kNumKnownAlgorithms;

struct FreeDeleter {
  void operator()(void* p) const;
};
using Buffer = std::unique_ptr<char, FreeDeleter>;

class Bench {
 public:
  // dev: device buffers to measure (--device), or null for host memory.
  Bench(const Options& options, const CollDesc& coll, collieComm_t comm, int rank, int nranks,
        DeviceMemory* dev = nullptr);

  // Buffers, CSV and JSON files; every rank learns whether any rank failed, so all stop together.
  bool setUp();
  std::vector<RankInfo> gatherRanks();
  // One table: algo "" keeps the library's choice, "auto" asks for it and names its pick.
  // False when the algorithm cannot run this collective here (on every rank alike).
  bool runTable(const std::string& algo, collieDataType_t dtype, collieRedOp_t op, int sweep);
  // Several tables measured size by size (--algo all): at each size every algorithm in turn, so
  // that the algorithms compared at one size are measured seconds apart, not minutes. runs[a]
  // turns false for an algorithm that cannot run the collective here.
  void runInterleaved(const std::vector<std::string>& algos, std::vector<bool>* runs,
                      collieDataType_t dtype, collieRedOp_t op, int sweep);
  // After the last sweep: median rows (when repeated), summary, CSV and JSON.
  void finish();

  int totalErrors();
  double avgBusBw() const { return bwCount_ ? bwSum_ / bwCount_ : 0.0; }
  bool jsonFailed() const { return jsonFailed_; }
  void setProgress(bool on) { progress_ = on; }

 private:
  // Sets the algorithm, checks that it runs this collective, and warms every size.
  bool openTable(const std::string& algo, collieDataType_t dtype, collieRedOp_t op, int sweep);
  // Both placements of one size under one algorithm.
  void measureRow(const std::string& algo, size_t size, collieDataType_t dtype, collieRedOp_t op);
  // Repeated or interleaved runs print their tables after the last sweep.
  bool printsAtEnd() const { return o_.repeat > 1 || o_.algo == "all"; }
  void printResultRow(const Result& outOfPlace, const Result& inPlace, double factor);
  void check(collieResult_t result);
  size_t nextSize(size_t size) const;
  size_t countFor(size_t size, const TypeInfo& type) const;
  // The forced algorithm applies to measured calls only; barriers and time reductions run
  // with the library's choice, whatever is being measured.
  void useAlgo(bool measured);
  void barrier();
  int64_t reduceInt(int64_t value, collieRedOp_t op);
  double reduceDouble(double value, collieRedOp_t op);
  CollCall call(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace, int iter);
  // The host buffers of iteration 0, where inputs are made and results checked; with device
  // buffers they are copied down before the call and the result up after it.
  CollCall hostCall(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace);
  size_t windowBytes(size_t count, collieDataType_t dtype) const;
  void fillInputs(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace, int rep);
  int64_t checkOutputs(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace,
                       int rep);
  void deviceOrDie(bool ok, const std::string& why);
  void syncDevice();
  collieResult_t runColl(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace,
                         int iter);
  // Calls until the tuner has stopped trying algorithms for this shape (collieCommLastAlgorithm
  // no longer says "(trial)"), so that no trial call is timed; the calls are like the timed
  // ones (see the .cc).
  void settleTuner(size_t count, collieDataType_t dtype, collieRedOp_t op);
  void runIteration(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace, int it);
  // One rank's seconds combined across ranks as -a says (rank 0, mean, min or max).
  double combineRanks(double sec);
  // Seconds per call, combined across ranks; *cpuSec (when not null): the host time spent
  // issuing them, combined alike.
  double timeIterations(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace,
                        double* cpuSec);
  int64_t checkResults(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace);
  void benchOne(size_t count, collieDataType_t dtype, collieRedOp_t op, bool inPlace);
  Result& record(size_t count, const TypeInfo& type, collieRedOp_t op, bool inPlace);
  const char* opLabel(collieRedOp_t op) const;
  bool showAlgo() const { return table_ == "auto"; }

  const Options& o_;
  const CollDesc& coll_;
  collieComm_t comm_;
  int rank_;
  int nranks_;
  DeviceMemory* dev_;  // null for host buffers
  Buffer send_;
  Buffer recv_;
  CsvWriter csv_;
  int rep_ = 0;
  int64_t localErrors_ = 0;  // checks in which this rank saw a wrong element
  double bwSum_ = 0;
  int bwCount_ = 0;
  std::vector<Result> results_;  // sweep order; every sweep measures the same list
  int sweep_ = 0;
  bool progress_ = false;
  bool jsonFailed_ = false;
  std::string table_;     // the algorithm of the table being measured ("" library default)
  std::string current_;   // what the communicator is set to now
  std::string picked_;    // the algorithm the last timed call ran
  std::string rowAlgos_;  // out-of-place[/in-place] picks of the row being printed
  std::string header_;    // the algorithm whose table header was printed last
  std::vector<std::string> skipped_;  // algorithms that cannot run this collective
};

}  // namespace collie::perf
