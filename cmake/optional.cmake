# Optional parts are found whole or not at all: headers, library and a test program that
# compiles and links. A part found in half is absent, with one line that says what to install;
# COLLIE_WITH_<NAME>=ON turns that line into an error.

# Says that part NAME is absent and why; fails instead when COLLIE_WITH_<NAME> is ON.
function(collie_part_absent name why hint)
  if(COLLIE_WITH_${name} STREQUAL "ON")
    message(FATAL_ERROR "COLLIE_WITH_${name}=ON but ${why} (${hint})")
  endif()
  message(STATUS "Collie: ${name} off: ${why} (${hint})")
endfunction()

# Sets RESULT to TRUE when SOURCE (a file name whose extension gives the language) compiles and
# links with the INCLUDES and LIBRARIES given. Never cached: a part installed later is seen.
function(collie_test_program result name source)
  cmake_parse_arguments(PARSE_ARGV 3 arg "" "" "INCLUDES;LIBRARIES;DEFINITIONS")
  try_compile(ok SOURCE_FROM_CONTENT ${name} "${source}" NO_CACHE
              CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${arg_INCLUDES}"
              COMPILE_DEFINITIONS ${arg_DEFINITIONS}
              LINK_LIBRARIES ${arg_LIBRARIES}
              OUTPUT_VARIABLE log)
  if(NOT ok)
    file(WRITE ${CMAKE_BINARY_DIR}/CMakeFiles/collie-test-${name}.log "${log}")
  endif()
  set(${result} ${ok} PARENT_SCOPE)
endfunction()

# Sets RESULT to FALSE and WHAT to the first missing path when an imported target in TARGETS
# names an include folder or library file that does not exist: try_compile would stop
# configuring on it.
function(collie_targets_whole result what)
  foreach(t ${ARGN})
    if(NOT TARGET ${t})
      continue()
    endif()
    get_target_property(incs ${t} INTERFACE_INCLUDE_DIRECTORIES)
    get_target_property(kind ${t} TYPE)
    set(paths)
    if(incs)
      list(APPEND paths ${incs})
    endif()
    if(NOT kind STREQUAL "INTERFACE_LIBRARY")
      get_target_property(loc ${t} LOCATION)
      list(APPEND paths ${loc})
    endif()
    foreach(p ${paths})
      if(NOT p MATCHES "^\\$<" AND NOT EXISTS "${p}")
        set(${result} FALSE PARENT_SCOPE)
        set(${what} "${p}" PARENT_SCOPE)
        return()
      endif()
    endforeach()
  endforeach()
  set(${result} TRUE PARENT_SCOPE)
endfunction()
