// collie-perf's command line: the input's lines are its arguments (after the program name). The
// parser says run, help or a usage error with its reason; options it lets run are consistent.
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

  // Parsed twice: a call must not depend on where getopt stopped in the one before.
  collie::perf::Options o, again;
  std::string error, error2;
  const int n = static_cast<int>(words.size());
  const auto outcome = collie::perf::parseOptions(n, argv.data(), &o, &error);
  FUZZ_CHECK(collie::perf::parseOptions(n, argv.data(), &again, &error2) == outcome);
  FUZZ_CHECK(error == error2 && o.minBytes == again.minBytes && o.maxBytes == again.maxBytes &&
             o.iters == again.iters && o.datatype == again.datatype && o.algo == again.algo);
  if (outcome == collie::perf::ParseOutcome::kRun) {
    FUZZ_CHECK(o.minBytes <= o.maxBytes);
    FUZZ_CHECK(o.stepFactor > 1 || o.stepBytes > 0 || o.minBytes == o.maxBytes);
    FUZZ_CHECK(o.iters >= 1 && o.repeat >= 1 && o.blocking >= 0 && o.blocking <= 3);
  } else if (outcome != collie::perf::ParseOutcome::kHelp) {
    FUZZ_CHECK(!error.empty());
  }
  return 0;
}
