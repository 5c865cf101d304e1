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

// What the trials' figures ("tried (median/fastest) a 3.0/2.5 us, b ...; ...") select: the
// first candidate (the model's pick), unless a candidate's median is below the first one's
// fastest call; then the one of those with the lowest median. Then the others by median (of
// equals the earlier), up to three in all: the ones that run in a row.
std::vector<std::string> trialsOrder(const std::string& line) {
  std::vector<double> fastest;
  const auto medians = figures(line, &fastest);
  if (medians.empty() || fastest.size() != medians.size()) return {};
  size_t best = 0;
  for (size_t i = 1; i < medians.size(); ++i)
    if (medians[i].second < fastest[0] && (best == 0 || medians[i].second < medians[best].second))
      best = i;
  std::vector<size_t> rest;
  for (size_t i = 0; i < medians.size(); ++i)
    if (i != best) rest.push_back(i);
  std::stable_sort(rest.begin(), rest.end(),
                   [&](size_t x, size_t y) { return medians[x].second < medians[y].second; });
  std::vector<std::string> out = {medians[best].first};
  for (size_t i = 0; i < rest.size() && out.size() < 3; ++i) out.push_back(medians[rest[i]].first);
  return out;
}

// Whether a shape's lines follow their figures; returns the algorithm they settle on ("" if
// they do not).
std::string settledPerFigures(const std::vector<std::string>& lines) {
  if (lines.empty() || lines[0].rfind("tried (median/fastest) ", 0) != 0) return "";
  const std::vector<std::string> order = trialsOrder(lines[0]);
  if (order.empty()) return "";
  if (lines.size() == 1) {
    const size_t at = lines[0].find("; takes ");
    return at != std::string::npos && lines[0].substr(at + 8) == order[0] ? order[0] : "";
  }
  std::string runs = "; runs in a row";
  for (size_t i = 0; i < order.size(); ++i) runs += (i ? ", " : " ") + order[i];
  if (lines.size() != 2 || lines[0].find(runs + " (") == std::string::npos ||
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
  // The lowest mean (the log rounds to 0.1 us), or the trials' pick: the lowest mean replaces it
  // only if its blocks won most rounds too, which the log does not show.
  const size_t at = lines[1].find("; takes ");
  if (at == std::string::npos) return "";
  const std::string taken = lines[1].substr(at + 8);
  if (taken == order[0]) return taken;
  for (const auto& m : means)
    if (m.first == taken && m.second <= fastest + 0.1) return taken;
  return "";
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
      if (counts[i] == 7) EXPECT_EQ(lines.size(), 2u) << o.output;
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
