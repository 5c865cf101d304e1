# Finds what the PyTorch backend needs, whole: Torch (TorchConfig.cmake) whose python module
# imports, libtorch_python, pybind11 and Python 3's headers, and a program that links libtorch
# (pybind11's headers need a Python module to link, so they are only checked to exist).
# Sets COLLIE_HAVE_TORCH, COLLIE_TORCH_PYTHON_LIBRARY and COLLIE_TORCH_CXX_FLAGS.
# Debian's torch lives in /usr/bin/python3's packages; another python3 first on PATH would miss it.
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
set(COLLIE_TORCH_HINT "apt-get install python3-torch libtorch-dev pybind11-dev python3-dev")
find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
find_package(Torch CONFIG QUIET)
find_package(pybind11 CONFIG QUIET)
unset(torch_missing)
if(NOT Python3_FOUND)
  set(torch_missing "no Python 3 interpreter with its headers")
elseif(NOT Torch_FOUND)
  set(torch_missing "no TorchConfig.cmake")
elseif(NOT pybind11_FOUND)
  set(torch_missing "no pybind11Config.cmake")
else()
  find_library(COLLIE_TORCH_PYTHON_LIBRARY torch_python PATHS "${TORCH_INSTALL_PREFIX}/lib"
               NO_CACHE)
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "import torch" RESULT_VARIABLE import_rc
                  OUTPUT_QUIET ERROR_QUIET)
  collie_targets_whole(torch_whole torch_gone ${TORCH_LIBRARIES} pybind11::headers)
  if(NOT COLLIE_TORCH_PYTHON_LIBRARY)
    set(torch_missing "no libtorch_python beside ${TORCH_INSTALL_PREFIX}")
  elseif(NOT import_rc EQUAL 0)
    set(torch_missing "${Python3_EXECUTABLE} cannot import torch")
  elseif(NOT torch_whole)
    set(torch_missing "Torch names ${torch_gone}, which is not there")
  endif()
endif()
# The test program takes seconds: it runs again only when what it was built from changes.
set(torch_key "${Torch_DIR};${Torch_VERSION};${pybind11_DIR};${Python3_EXECUTABLE}")
if(NOT DEFINED torch_missing AND NOT COLLIE_TORCH_PROBED STREQUAL torch_key)
  collie_test_program(torch_ok torch.cc
    "#include <torch/version.h>\n#include <c10/core/CPUAllocator.h>\nint main() { return c10::GetCPUAllocator() == nullptr; }\n"
    LIBRARIES ${TORCH_LIBRARIES})
  if(torch_ok)
    set(COLLIE_TORCH_PROBED "${torch_key}" CACHE INTERNAL "What the torch test program was built from")
  else()
    set(torch_missing "a program with libtorch does not build")
  endif()
endif()
if(DEFINED torch_missing)
  unset(COLLIE_TORCH_PROBED CACHE)
  collie_part_absent(TORCH "${torch_missing}" "${COLLIE_TORCH_HINT}")
else()
  set(COLLIE_HAVE_TORCH ON)
  separate_arguments(COLLIE_TORCH_CXX_FLAGS UNIX_COMMAND "${TORCH_CXX_FLAGS}")
endif()
