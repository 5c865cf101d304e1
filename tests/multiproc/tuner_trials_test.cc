// The tuner's trials with real ranks: the first calls of each new call shape run one candidate
// algorithm after another (collieCommLastAlgorithm says "(trial)"), every result is right
// during the trials and after, all ranks run the same algorithms call for call, and they
// settle on the candidate the agreed times select, the one every rank logs: the trials pick
// one, and it and the next two by median then run in a row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "collie/collie.h"
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
  for (int call = 0; call < 1000 && settledCalls < 3; ++call) {
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

// A rank's "tuner: allreduce count N float: ..." lines for count, in order: "tried
// (median/fastest) a 1.0/0.9 us, b 2.0/1.8 us; takes a" when the trials settle the shape, or
// "...; runs in a row a, b (2 blocks of K calls each)" and then "in a row (mean) a 9.0 us,
// b 8.0 us; takes b".
std::vector<std::string> tunerLines(const std::string& output, size_t count) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  const std::string prefix = "tuner: allreduce count " + std::to_string(count) + " float: ";
  for (std::string l; std::getline(in, l);) {
    const size_t at = l.find(prefix);
    if (at != std::string::npos) lines.push_back(l.substr(at + prefix.size()));
  }
  return lines;
}

// "name 1.0/0.9 us" or "name 9.0 us" items, comma-separated, from after the first ") " of line
// to its "; ": the names and the first figure of each; *fastest gets the second when there is
// one.
std::vector<std::pair<std::string, double>> figures(const std::string& line,
                                                    std::vector<double>* fastest) {
  const size_t from = line.find(") ") + 2, semi = line.find("; ");
  std::istringstream in(line.substr(from, semi - from));
  std::vector<std::pair<std::string, double>> out;
  for (std::string item; std::getline(in, item, ',');) {
    char name[64];
    double first = 0, second = 0;
    const int got = sscanf(item.c_str(), " %63s %lf/%lf us", name, &first, &second);
    if (got < 2) return {};
    out.emplace_back(name, first);
    if (got == 3) fastest->push_back(second);
  }
  return out;
}

// The log prints times to 0.1 us: two figures that close may stand in either order.
constexpr double kLogRounding = 0.1;

// Whether pick is the candidate the trials' figures ("tried (median/fastest) a 3.0/2.5 us, b
// ...; ...") select: the first candidate (the model's pick), unless a candidate's median is below
// the first one's fastest call; then the one of those with the lowest median.
bool pickFollowsFigures(const std::string& line, const std::string& pick) {
  std::vector<double> fastest;
  const auto medians = figures(line, &fastest);
  if (medians.empty() || fastest.size() != medians.size()) return false;
  double lowestBelow = 1e300;
  bool surelyBelow = false;
  for (size_t i = 1; i < medians.size(); ++i) {
    if (medians[i].second < fastest[0] + kLogRounding)
      lowestBelow = std::min(lowestBelow, medians[i].second);
    if (medians[i].second < fastest[0] - kLogRounding) surelyBelow = true;
  }
  for (size_t i = 0; i < medians.size(); ++i)
    if (medians[i].first == pick)
      return i == 0 ? !surelyBelow
                    : medians[i].second < fastest[0] + kLogRounding &&
                          medians[i].second <= lowestBelow + kLogRounding;
  return false;
}

// Whether order (what runs in a row after the trials) follows their figures: the trials' pick,
// then the others by median, up to three in all.
bool followsFigures(const std::string& line, const std::vector<std::string>& order) {
  std::vector<double> unused;
  const auto medians = figures(line, &unused);
  if (order.size() != std::min<size_t>(3, medians.size()) || !pickFollowsFigures(line, order[0]))
    return false;
  auto medianOf = [&](const std::string& name) {
    for (const auto& m : medians)
      if (m.first == name) return m.second;
    return -1.0;
  };
  for (size_t k = 1; k < order.size(); ++k) {
    if (medianOf(order[k]) < 0 || std::count(order.begin(), order.end(), order[k]) != 1)
      return false;
    if (k > 1 && medianOf(order[k]) < medianOf(order[k - 1]) - kLogRounding) return false;
  }
  // None left out that is surely faster than the last one in.
  for (const auto& m : medians)
    if (std::count(order.begin(), order.end(), m.first) == 0 &&
        m.second < medianOf(order.back()) - kLogRounding)
      return false;
  return true;
}

// The candidates "...; runs in a row a, b, c (N blocks ..." names, or {} if none.
std::vector<std::string> runsInARow(const std::string& line) {
  const std::string key = "; runs in a row ";
  const size_t at = line.find(key);
  if (at == std::string::npos) return {};
  const size_t end = line.find(" (", at);
  if (end == std::string::npos) return {};
  std::istringstream in(line.substr(at + key.size(), end - at - key.size()));
  std::vector<std::string> out;
  for (std::string item; std::getline(in, item, ',');)
    out.push_back(item.substr(item.find_first_not_of(' ')));
  return out;
}

// Whether a shape's lines follow their figures; returns the algorithm they settle on ("" if
// they do not).
std::string settledPerFigures(const std::vector<std::string>& lines) {
  if (lines.empty() || lines[0].rfind("tried (median/fastest) ", 0) != 0) return "";
  if (lines.size() == 1) {
    const size_t at = lines[0].find("; takes ");
    if (at == std::string::npos) return "";
    const std::string taken = lines[0].substr(at + 8);
    return pickFollowsFigures(lines[0], taken) ? taken : "";
  }
  const std::vector<std::string> order = runsInARow(lines[0]);
  if (lines.size() != 2 || !followsFigures(lines[0], order) ||
      lines[1].rfind("in a row (mean) ", 0) != 0)
    return "";
  std::vector<double> unused;
  const auto means = figures(lines[1], &unused);
  if (means.size() != order.size()) return "";
  double fastest = means[0].second;
  for (size_t i = 0; i < means.size(); ++i) {
    if (means[i].first != order[i]) return "";
    fastest = std::min(fastest, means[i].second);
  }
  // The lowest mean (the log rounds to 0.1 us) or one within 5% of it that was faster in the
  // trials, or the trials' pick: the mean replaces it only if its blocks won most rounds, or half
  // of them by more, which the log does not show.
  const size_t at = lines[1].find("; takes ");
  if (at == std::string::npos) return "";
  const std::string taken = lines[1].substr(at + 8);
  if (taken == order[0]) return taken;
  for (const auto& m : means)
    if (m.first == taken && m.second <= fastest * 1.05 + kLogRounding) return taken;
  return "";
}

// The checker itself, on lines a run printed: rhd and recursive_doubling both show 2434.5 us,
// and the tuner ran the one whose unrounded median was lower.
TEST(TunerTrialsLog, FiguresEqualInTheLogMayStandInEitherOrder) {
  const std::string tried =
      "tried (median/fastest) shm_direct 2172.0/2134.2 us, ring 4224.2/478.1 us, tree "
      "2372.1/465.5 us, rhd 2434.5/756.7 us, recursive_doubling 2434.5/475.2 us";
  const std::string means =
      "in a row (mean) shm_direct 2211.2 us, tree 2361.0 us, recursive_doubling 2331.0 us; "
      "takes shm_direct";
  EXPECT_EQ(settledPerFigures(
                {tried + "; runs in a row shm_direct, tree, recursive_doubling (4 blocks of 25 "
                         "calls each)",
                 means}),
            "shm_direct");
  // Orders the figures rule out still fail: ring's median is far above the others.
  EXPECT_EQ(settledPerFigures({tried + "; runs in a row shm_direct, tree, ring (4 blocks of 25 "
                                       "calls each)",
                               "in a row (mean) shm_direct 2211.2 us, tree 2361.0 us, ring "
                               "2331.0 us; takes shm_direct"}),
            "");
  EXPECT_EQ(settledPerFigures({tried + "; runs in a row tree, shm_direct, rhd (4 blocks of 25 "
                                       "calls each)",
                               "in a row (mean) tree 2211.2 us, shm_direct 2361.0 us, rhd "
                               "2331.0 us; takes tree"}),
            "");
  // A pick whose mean is not the lowest: only the trials' own pick may stay.
  EXPECT_EQ(settledPerFigures({tried + "; runs in a row shm_direct, tree, rhd (4 blocks of 25 "
                                       "calls each)",
                               "in a row (mean) shm_direct 2211.2 us, tree 2361.0 us, rhd "
                               "2331.0 us; takes rhd"}),
            "");
  EXPECT_EQ(settledPerFigures({tried + "; takes shm_direct"}), "shm_direct");
  EXPECT_EQ(settledPerFigures({tried + "; takes tree"}), "");
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
    for (size_t i = 0; i < counts.size(); ++i) {
      const std::vector<std::string> lines = tunerLines(o.output, counts[i]);
      EXPECT_EQ(lines, tunerLines(out[0].output, counts[i]));
      const std::string taken = settledPerFigures(lines);
      EXPECT_NE(taken, "") << o.output;
      // Calls of a few elements are short enough for runs.
      if (counts[i] == 7) {
        EXPECT_EQ(lines.size(), 2u) << o.output;
      }
      // The calls after the trials ran what the lines say.
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
