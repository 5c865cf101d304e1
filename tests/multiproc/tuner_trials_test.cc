// The tuner's trials with real ranks: the first calls of each new call shape run one candidate
// algorithm after another (collieCommLastAlgorithm says "(trial)"), every result is right
// during the trials and after, all ranks run the same algorithms call for call, and they
// settle on the candidate the agreed times select, the one every rank logs.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "collie/collie.h"
#include "src/base/log.h"
#include "tests/harness/process_world.h"
#include "tests/harness/reference.h"

namespace collie {
namespace testing {
namespace {

bool isTrial(const std::string& name) {
  return name.size() > 8 && name.compare(name.size() - 8, 8, " (trial)") == 0;
}

// Runs AllReduce (f32 sum) of count until the trials are over and three calls more, checking
// every result; notes the names the calls ran, in order.
bool runShape(collieComm_t comm, int rank, int n, size_t count, Reporter& rep) {
  std::vector<float> v(count);
  std::string names;
  int settledCalls = 0;
  for (int call = 0; call < 200 && settledCalls < 3; ++call) {
    fillInput(v.data(), collieFloat32, collieSum, rank, count, n);
    if (collieAllReduce(v.data(), v.data(), count, collieFloat32, collieSum, comm, nullptr) !=
        collieSuccess) {
      rep.fail("count " + std::to_string(count) + " call " + std::to_string(call) + ": " +
               collieGetLastError(comm));
      return false;
    }
    std::string bad;
    if (countWrong(v.data(), collieFloat32, collieSum, count, n, &bad) != 0)
      rep.fail("count " + std::to_string(count) + " call " + std::to_string(call) + ": " + bad);
    const char* ran = "";
    collieCommLastAlgorithm(comm, &ran);
    if (!isTrial(ran))
      ++settledCalls;
    else if (settledCalls > 0)
      rep.fail(std::string("a trial after the choice: ") + ran);
    names += std::string(names.empty() ? "" : ",") + ran;
  }
  rep.note(names);
  return true;
}

// The "tuner: ... tried (median/fastest) a 1.0/0.9 us, b 2.0/1.8 us; takes a" lines of a
// rank's output.
std::vector<std::string> tunerLines(const std::string& output) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string l; std::getline(in, l);) {
    const size_t at = l.find("tuner: allreduce count ");
    if (at != std::string::npos && l.find(" float:") != std::string::npos)
      lines.push_back(l.substr(at));
  }
  return lines;
}

// Whether a line's choice follows its figures ("tried (median/fastest) a 3.0/2.5 us, b ...;
// takes b"): the first candidate (the model's pick), unless a candidate's median is below the
// first one's fastest call; then the one of those with the lowest median.
bool takesWhatTheFiguresSay(const std::string& line) {
  const size_t tried = line.find(") ") + 2, semi = line.find("; takes ");
  const std::string taken = line.substr(semi + 8);
  std::istringstream in(line.substr(tried, semi - tried));
  std::string want, first;
  double firstFastest = 0, bestMedian = 0;
  for (std::string item; std::getline(in, item, ',');) {
    char name[64];
    double median = 0, fastest = 0;
    if (sscanf(item.c_str(), " %63s %lf/%lf us", name, &median, &fastest) != 3) return false;
    if (first.empty()) {
      first = want = name;
      firstFastest = fastest;
    } else if (median < firstFastest && (want == first || median < bestMedian)) {
      want = name;
      bestMedian = median;
    }
  }
  return !first.empty() && taken == want;
}

class TunerTrials : public ::testing::TestWithParam<const char*> {};

TEST_P(TunerTrials, EveryRankTriesTheSameAlgorithmsAndSettlesAlike) {
  const int n = 3;
  WorldOptions opt;
  opt.timeoutSec = 120;
  opt.env = {{"COLLIE_TIMEOUT_MS", "30000"},
             {"COLLIE_TRANSPORT", GetParam()},
             {"COLLIE_TUNER_SPAN", "1000"},  // every algorithm that can run the call
             {"COLLIE_DEBUG", "INFO"},
             {"COLLIE_DEBUG_SUBSYS", "COLL"}};
  // A few elements (many rounds of short calls) and a count no rank count divides.
  const std::vector<size_t> counts = {7, 100003};
  auto out = runWorld(n, opt, [&](int rank, Reporter& rep) {
    gLogLevel.store(static_cast<int>(LogLevel::kInfo));
    collieComm_t comm = nullptr;
    if (collieCommInitFromEnv(&comm) != collieSuccess)
      return rep.fail(std::string("init: ") + collieGetLastError(nullptr));
    for (size_t count : counts)
      if (!runShape(comm, rank, n, count, rep)) return;
    collieCommDestroy(comm);
  });
  expectAllPassed(out);
  ASSERT_EQ(static_cast<int>(out.size()), n);
  for (const RankOutcome& o : out) {
    ASSERT_EQ(o.notes.size(), counts.size());
    for (size_t i = 0; i < counts.size(); ++i) EXPECT_EQ(o.notes[i], out[0].notes[i]);
    const std::vector<std::string> lines = tunerLines(o.output);
    ASSERT_EQ(lines.size(), counts.size()) << o.output;
    for (size_t i = 0; i < counts.size(); ++i) {
      EXPECT_EQ(lines[i], tunerLines(out[0].output)[i]);
      EXPECT_TRUE(takesWhatTheFiguresSay(lines[i])) << lines[i];
      const std::string taken = lines[i].substr(lines[i].find("; takes ") + 8);
      // The calls after the trials ran what the line says.
      const std::string& names = o.notes[i];
      EXPECT_EQ(names.substr(names.rfind(',') + 1), taken) << names;
      EXPECT_NE(names.find("(trial)"), std::string::npos) << names;
    }
  }
}

TEST_P(TunerTrials, TrialsOffLeaveTheChoiceToTheModel) {
  WorldOptions opt;
  opt.timeoutSec = 60;
  opt.env = {{"COLLIE_TIMEOUT_MS", "30000"},
             {"COLLIE_TRANSPORT", GetParam()},
             {"COLLIE_TUNER_TRIALS", "0"}};
  auto out = runWorld(2, opt, [&](int rank, Reporter& rep) {
    collieComm_t comm = nullptr;
    if (collieCommInitFromEnv(&comm) != collieSuccess)
      return rep.fail(std::string("init: ") + collieGetLastError(nullptr));
    if (!runShape(comm, rank, 2, 100003, rep)) return;
    collieCommDestroy(comm);
  });
  expectAllPassed(out);
  for (const RankOutcome& o : out) {
    ASSERT_EQ(o.notes.size(), 1u);
    EXPECT_EQ(o.notes[0].find("(trial)"), std::string::npos) << o.notes[0];
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, TunerTrials, ::testing::Values("shm", "tcp"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param);
                         });

}  // namespace
}  // namespace testing
}  // namespace collie
