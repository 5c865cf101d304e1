// collie-perf's command line: the input's lines are its arguments (after the program name). The
// parser says run, help or a usage error with its reason; options it lets run are consistent.
#include <getopt.h>

#include <vector>

#include "perf/perf_options.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> words{"collie-perf"};
  for (size_t pos = 0; pos <= text.size() && words.size() < 64;) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    words.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  if (text.empty()) words.pop_back();
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(&w[0]);
  argv.push_back(nullptr);

  // The parser is written for one call per process: getopt keeps its place inside the last
  // argument cluster of the previous call, which optind = 0 makes it forget.
  optind = 0;
  char* none[] = {argv[0], nullptr};
  getopt(1, none, "");

  collie::perf::Options o;
  std::string error;
  const auto outcome =
      collie::perf::parseOptions(static_cast<int>(words.size()), argv.data(), &o, &error);
  if (outcome == collie::perf::ParseOutcome::kRun) {
    FUZZ_CHECK(o.minBytes <= o.maxBytes);
    FUZZ_CHECK(o.stepFactor > 1 || o.stepBytes > 0 || o.minBytes == o.maxBytes);
    FUZZ_CHECK(o.iters >= 1 && o.repeat >= 1 && o.blocking >= 0 && o.blocking <= 3);
  } else if (outcome != collie::perf::ParseOutcome::kHelp) {
    FUZZ_CHECK(!error.empty());
  }
  return 0;
}
