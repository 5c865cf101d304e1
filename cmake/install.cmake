# Install rules, the CMake package (collie::collie), collie.pc and the Debian packages.
# Components, one .deb each: runtime (the shared library), dev (headers, static library, CMake
# and pkg-config files), tools (collie-run, collie-perf, ...) and torch (bindings/pytorch).
include(CMakePackageConfigHelpers)

set(COLLIE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/collie)
set(COLLIE_PKGCONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(TARGETS collie collie_static EXPORT collieTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/collie DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT dev)

# The user tools; test programs and benchmarks of the internals stay in the build tree.
set(COLLIE_INSTALLED_TOOLS)
foreach(tool collie-run collie-perf collie-sim collie-limits collie-train)
  if(TARGET ${tool})
    list(APPEND COLLIE_INSTALLED_TOOLS ${tool})
  endif()
endforeach()
# Installed tools find libcollie.so beside them, wherever the prefix is.
set_target_properties(${COLLIE_INSTALLED_TOOLS} PROPERTIES
                      INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
if(COLLIE_HAVE_CUDA)
  # The CUDA runtime may live outside the loader's paths (/usr/local/cuda): keep its folder.
  set_target_properties(collie ${COLLIE_INSTALLED_TOOLS} PROPERTIES
                        INSTALL_RPATH_USE_LINK_PATH ON)
endif()
install(TARGETS ${COLLIE_INSTALLED_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        COMPONENT tools)

# find_package(collie CONFIG): collie::collie (shared) and collie::collie_static.
install(EXPORT collieTargets NAMESPACE collie:: DESTINATION ${COLLIE_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/collieConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/collieConfig.cmake
                              INSTALL_DESTINATION ${COLLIE_CMAKE_DIR})
# The major version is the SONAME's: a newer minor release serves older callers.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/collieConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/collieConfig.cmake
              ${PROJECT_BINARY_DIR}/collieConfigVersion.cmake
        DESTINATION ${COLLIE_CMAKE_DIR} COMPONENT dev)

# collie.pc: paths relative to the file itself, so that a prefix given at install time, or a
# package unpacked elsewhere, still points at its own headers and library.
file(RELATIVE_PATH COLLIE_PC_TO_PREFIX /root/${COLLIE_PKGCONFIG_DIR} /root)
string(REGEX REPLACE "/$" "" COLLIE_PC_TO_PREFIX "${COLLIE_PC_TO_PREFIX}")
set(COLLIE_PC_LIBS_PRIVATE "-pthread -ldl -lstdc++ -lm")
if(COLLIE_HAVE_CUDA)
  string(APPEND COLLIE_PC_LIBS_PRIVATE " -L${CUDAToolkit_LIBRARY_DIR} -lcudart")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/collie.pc.in ${PROJECT_BINARY_DIR}/collie.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/collie.pc DESTINATION ${COLLIE_PKGCONFIG_DIR} COMPONENT dev)

# Packages only from Collie's own tree: CPack's settings are global to the top-level project.
if(PROJECT_IS_TOP_LEVEL)
  include(${CMAKE_CURRENT_LIST_DIR}/deb.cmake)
endif()
