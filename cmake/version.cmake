# The one version number: collie.h's COLLIE_MAJOR, COLLIE_MINOR and COLLIE_PATCH. Read before
# project() so the project version, the SONAME and the version script's node all follow it.
file(STRINGS ${CMAKE_CURRENT_LIST_DIR}/../include/collie/collie.h collie_version_lines
     REGEX "^#define COLLIE_(MAJOR|MINOR|PATCH) +[0-9]+$")
foreach(part MAJOR MINOR PATCH)
  if(NOT collie_version_lines MATCHES "COLLIE_${part} +([0-9]+)")
    message(FATAL_ERROR "include/collie/collie.h has no '#define COLLIE_${part} <number>'")
  endif()
  set(COLLIE_VERSION_${part} ${CMAKE_MATCH_1})
endforeach()
set(COLLIE_VERSION ${COLLIE_VERSION_MAJOR}.${COLLIE_VERSION_MINOR}.${COLLIE_VERSION_PATCH})
