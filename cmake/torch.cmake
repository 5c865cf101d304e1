# Finds what the PyTorch backend needs: Torch (TorchConfig.cmake), libtorch_python, pybind11
# and Python 3's headers. Sets COLLIE_HAVE_TORCH, COLLIE_TORCH_PYTHON_LIBRARY and
# COLLIE_TORCH_CXX_FLAGS; finding nothing is quiet (AUTO).
# Debian's torch lives in /usr/bin/python3's packages; another python3 first on PATH would miss it.
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
find_package(Torch CONFIG QUIET)
find_package(pybind11 CONFIG QUIET)
if(Python3_FOUND AND Torch_FOUND AND pybind11_FOUND)
  find_library(COLLIE_TORCH_PYTHON_LIBRARY torch_python PATHS "${TORCH_INSTALL_PREFIX}/lib")
  if(COLLIE_TORCH_PYTHON_LIBRARY)
    set(COLLIE_HAVE_TORCH ON)
    separate_arguments(COLLIE_TORCH_CXX_FLAGS UNIX_COMMAND "${TORCH_CXX_FLAGS}")
  endif()
endif()
