# CUDA and NCCL: resolved once here so every folder sees the same answer.
#
# The toolkit may live under /usr/local/cuda without nvcc on PATH, and the build machines may
# have no GPU, so the compiler is found by path and the architectures are fixed (never
# "native", which needs a GPU to query). One shared cudart for the whole program; never the
# driver library (-lcuda): the runtime API is enough and the driver may be a stub.
set(COLLIE_HAVE_CUDA OFF)
set(COLLIE_HAVE_NCCL OFF)
set(COLLIE_CUDA_ROOT /usr/local/cuda CACHE PATH "Where the CUDA toolkit is looked for")

# Sets RESULT when COMPILER builds and links a kernel launch against the shared cudart. It is
# checked before enable_language(CUDA), which stops configuring on a broken toolkit.
function(collie_cuda_compiler_works result compiler)
  set(dir ${CMAKE_BINARY_DIR}/CMakeFiles/collie-cuda-probe)
  file(MAKE_DIRECTORY ${dir})
  file(WRITE ${dir}/probe.cu "__global__ void k() {}\nint main() { k<<<1, 1>>>(); return 0; }\n")
  execute_process(COMMAND ${compiler} -arch=sm_80 -cudart shared probe.cu -o probe
                  WORKING_DIRECTORY ${dir} RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(rc EQUAL 0)
    set(${result} TRUE PARENT_SCOPE)
  else()
    set(${result} FALSE PARENT_SCOPE)
  endif()
endfunction()

if(NOT COLLIE_WITH_CUDA STREQUAL "OFF" AND COLLIE_SANITIZE AND COLLIE_WITH_CUDA STREQUAL "AUTO")
  # ASan's shadow memory collides with the CUDA driver's mappings on a GPU: sanitized builds
  # test the host paths only unless CUDA is asked for explicitly.
  message(STATUS "Collie: CUDA off in the sanitizer build (COLLIE_WITH_CUDA=ON forces it)")
elseif(NOT COLLIE_WITH_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(COLLIE_NVCC nvcc HINTS ${COLLIE_CUDA_ROOT}/bin NO_CACHE)
    if(COLLIE_NVCC)
      set(CMAKE_CUDA_COMPILER ${COLLIE_NVCC})
    endif()
  endif()
  set(cuda_compiler "${CMAKE_CUDA_COMPILER}")
  if(NOT cuda_compiler AND DEFINED ENV{CUDACXX})
    set(cuda_compiler "$ENV{CUDACXX}")
  endif()
  if(cuda_compiler)
    if(CMAKE_CUDA_ARCHITECTURES MATCHES "native|all")
      message(FATAL_ERROR "CMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES}: give explicit "
                          "architectures (e.g. \"80;90\"); build machines may have no GPU")
    endif()
    collie_cuda_compiler_works(cuda_ok "${cuda_compiler}")
  endif()
  if(NOT cuda_compiler)
    collie_part_absent(CUDA "nvcc was not found" "set CMAKE_CUDA_COMPILER or COLLIE_CUDA_ROOT")
  elseif(NOT cuda_ok)
    collie_part_absent(CUDA "${cuda_compiler} cannot build a CUDA program with the shared cudart"
                       "install the whole CUDA toolkit under COLLIE_CUDA_ROOT")
  else()
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(COLLIE_HAVE_CUDA ON)
  endif()
endif()

# NCCL: the header at build time; libnccl itself is loaded at run time (dlopen) by the
# communicators that ask for it, so no other program loads it.
if(COLLIE_HAVE_CUDA AND NOT COLLIE_WITH_NCCL STREQUAL "OFF")
  find_path(COLLIE_NCCL_INCLUDE_DIR nccl.h HINTS ${COLLIE_CUDA_ROOT}/include
            ${CUDAToolkit_INCLUDE_DIRS})
  find_library(COLLIE_NCCL_LIBRARY nccl HINTS ${COLLIE_CUDA_ROOT}/lib ${COLLIE_CUDA_ROOT}/lib64
               ${CUDAToolkit_LIBRARY_DIR})
  if(NOT COLLIE_NCCL_INCLUDE_DIR OR NOT COLLIE_NCCL_LIBRARY)
    collie_part_absent(NCCL "no nccl.h or libnccl" "install NCCL into the CUDA toolkit")
  else()
    collie_test_program(nccl_ok nccl.c
      "#include <nccl.h>\nint main(void) { int v = 0; return ncclGetVersion(&v) != ncclSuccess; }\n"
      INCLUDES ${COLLIE_NCCL_INCLUDE_DIR} ${CUDAToolkit_INCLUDE_DIRS}
      LIBRARIES ${COLLIE_NCCL_LIBRARY} CUDA::cudart)
    if(nccl_ok)
      set(COLLIE_HAVE_NCCL ON)
      get_filename_component(COLLIE_NCCL_LIBDIR ${COLLIE_NCCL_LIBRARY} DIRECTORY)
    else()
      collie_part_absent(NCCL "a program with ${COLLIE_NCCL_LIBRARY} does not build"
                         "install NCCL's headers and library of one version")
    endif()
  endif()
elseif(COLLIE_WITH_NCCL STREQUAL "ON")
  message(FATAL_ERROR "COLLIE_WITH_NCCL=ON but CUDA is off")
endif()
