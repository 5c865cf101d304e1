# Debian packages (make deb): libcollieN (the shared library), libcollie-dev, collie-tools and,
# where the PyTorch backend is built, python3-collie-torch, written to build/deb/. Run `cpack` in
# the build tree after building it.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME collie)
set(CPACK_PACKAGE_VENDOR collie)
set(COLLIE_DEB_MAINTAINER "Collie maintainers <collie@localhost>"
    CACHE STRING "Maintainer field of the Debian packages")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${COLLIE_DEB_MAINTAINER}")
set(CPACK_OUTPUT_FILE_PREFIX deb)  # relative: deb/ under the folder cpack runs in
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev tools)
if(COLLIE_HAVE_TORCH)
  list(APPEND CPACK_COMPONENTS_ALL torch)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)

# Dependencies: the system libraries by dpkg-shlibdeps, which finds libcollie in the build tree
# (a private library to it); the packages of this build by the component dependencies.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_LIBRARY_OUTPUT_DIRECTORY})
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_COMPONENT_DEV_DEPENDS runtime)
set(CPACK_COMPONENT_TOOLS_DEPENDS runtime)
set(CPACK_COMPONENT_TORCH_DEPENDS runtime)

# The runtime package is named for the SONAME, so that two ABIs can be installed side by side.
get_target_property(COLLIE_SOVERSION collie SOVERSION)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libcollie${COLLIE_SOVERSION})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
# Descriptions: the first line is the package's summary.
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "collective communication library
AllReduce, ReduceScatter, AllGather, Broadcast, Reduce and Barrier between processes
on one host or many, over shared memory, TCP and UCX.")
if(COLLIE_HAVE_CUDA)
  # The CUDA runtime comes from NVIDIA's toolkit, not from a Debian package it could name.
  string(APPEND CPACK_COMPONENT_RUNTIME_DESCRIPTION
         "\nBuilt with CUDA: needs the CUDA runtime (libcudart) of the toolkit it was built with.")
endif()
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libcollie-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEV_DESCRIPTION "collective communication library - development files
Headers, the static library, the CMake package (find_package(collie)) and collie.pc.")
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME collie-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION net)
set(CPACK_COMPONENT_TOOLS_DESCRIPTION "collective communication library - tools
collie-run (a local launcher), collie-perf (bus bandwidth, as nccl-tests), collie-sim,
collie-limits and collie-train (built where zlib is).")
if(COLLIE_HAVE_TORCH)
  # Debian names a Python 3 module's package python3-<module>. The extension is built for one
  # CPython (its SOABI), so it pins that minor version as dh-python's python3:Depends would.
  set(CPACK_DEBIAN_TORCH_PACKAGE_NAME python3-collie-torch)
  set(CPACK_DEBIAN_TORCH_PACKAGE_SECTION python)
  # Python writes __pycache__ beside the module; prerm removes it, or the purge leaves it.
  set(CPACK_DEBIAN_TORCH_PACKAGE_CONTROL_EXTRA
      ${CMAKE_CURRENT_LIST_DIR}/deb-torch/postinst ${CMAKE_CURRENT_LIST_DIR}/deb-torch/prerm)
  set(CPACK_DEBIAN_TORCH_PACKAGE_CONTROL_STRICT_PERMISSION ON)
  math(EXPR collie_py_next "${Python3_VERSION_MINOR} + 1")
  set(CPACK_DEBIAN_TORCH_PACKAGE_DEPENDS "python3-torch, \
python3 (>= ${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}~), \
python3 (<< ${Python3_VERSION_MAJOR}.${collie_py_next})")
  set(CPACK_COMPONENT_TORCH_DESCRIPTION "collective communication library - PyTorch backend
collie_torch registers \"collie\" as a torch.distributed backend: import it before
init_process_group.")
endif()
include(CPack)
