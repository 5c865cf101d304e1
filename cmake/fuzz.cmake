# libFuzzer comes with clang's runtime libraries, a package of its own: a program must link
# -fsanitize=fuzzer before any fuzz target is configured.
include(cmake/optional.cmake)
collie_test_program(fuzzer_ok fuzz.cc
  "#include <cstddef>\n#include <cstdint>\nextern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n"
  LIBRARIES -fsanitize=fuzzer,address,undefined)
if(NOT fuzzer_ok)
  message(FATAL_ERROR "COLLIE_FUZZ=ON but clang cannot link libFuzzer "
                      "(apt-get install clang libclang-rt-14-dev)")
endif()
