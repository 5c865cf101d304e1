# Gloo, for perf/compare's peer driver: its header and library, found by path (a package's
# CMake config may name headers that are not installed), and a program that links it.
set(COLLIE_HAVE_GLOO OFF)
if(NOT COLLIE_WITH_GLOO STREQUAL "OFF")
  find_path(COLLIE_GLOO_INCLUDE_DIR gloo/allreduce_ring.h)
  find_library(COLLIE_GLOO_LIBRARY gloo)
  if(NOT COLLIE_GLOO_INCLUDE_DIR OR NOT COLLIE_GLOO_LIBRARY)
    collie_part_absent(GLOO "no gloo/allreduce_ring.h or libgloo" "apt-get install libgloo-dev")
  else()
    collie_test_program(gloo_ok gloo.cc
      "#include <gloo/rendezvous/context.h>\nint main() { gloo::rendezvous::Context c(0, 1); return c.size - 1; }\n"
      INCLUDES ${COLLIE_GLOO_INCLUDE_DIR} LIBRARIES ${COLLIE_GLOO_LIBRARY} Threads::Threads)
    if(gloo_ok)
      set(COLLIE_HAVE_GLOO ON)
      set(COLLIE_GLOO_TARGET ${COLLIE_GLOO_LIBRARY})
    else()
      collie_part_absent(GLOO "a program with ${COLLIE_GLOO_LIBRARY} does not build"
                         "apt-get install libgloo-dev")
    endif()
  endif()
endif()
