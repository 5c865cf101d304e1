# CUDA and NCCL: resolved once here so every folder sees the same answer.
#
# The toolkit may live under /usr/local/cuda without nvcc on PATH, and the build machines may
# have no GPU, so the compiler is found by path and the architectures are fixed (never
# "native", which needs a GPU to query). One shared cudart for the whole program; never the
# driver library (-lcuda): the runtime API is enough and the driver may be a stub.
set(COLLIE_HAVE_CUDA OFF)
set(COLLIE_HAVE_NCCL OFF)
set(COLLIE_CUDA_ROOT /usr/local/cuda CACHE PATH "Where the CUDA toolkit is looked for")

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
  if(CMAKE_CUDA_COMPILER OR DEFINED ENV{CUDACXX})
    if(CMAKE_CUDA_ARCHITECTURES MATCHES "native|all")
      message(FATAL_ERROR "CMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES}: give explicit "
                          "architectures (e.g. \"80;90\"); build machines may have no GPU")
    endif()
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(COLLIE_HAVE_CUDA ON)
  elseif(COLLIE_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "COLLIE_WITH_CUDA=ON but nvcc was not found (set CMAKE_CUDA_COMPILER or "
                        "COLLIE_CUDA_ROOT)")
  endif()
endif()

# NCCL: the header at build time; libnccl itself is loaded at run time (dlopen) by the
# communicators that ask for it, so no other program loads it.
if(COLLIE_HAVE_CUDA AND NOT COLLIE_WITH_NCCL STREQUAL "OFF")
  find_path(COLLIE_NCCL_INCLUDE_DIR nccl.h HINTS ${COLLIE_CUDA_ROOT}/include
            ${CUDAToolkit_INCLUDE_DIRS})
  find_library(COLLIE_NCCL_LIBRARY nccl HINTS ${COLLIE_CUDA_ROOT}/lib ${COLLIE_CUDA_ROOT}/lib64
               ${CUDAToolkit_LIBRARY_DIR})
  if(COLLIE_NCCL_INCLUDE_DIR AND COLLIE_NCCL_LIBRARY)
    set(COLLIE_HAVE_NCCL ON)
    get_filename_component(COLLIE_NCCL_LIBDIR ${COLLIE_NCCL_LIBRARY} DIRECTORY)
  endif()
endif()
if(COLLIE_WITH_NCCL STREQUAL "ON" AND NOT COLLIE_HAVE_NCCL)
  message(FATAL_ERROR "COLLIE_WITH_NCCL=ON but NCCL (nccl.h, libnccl) was not found, or CUDA is off")
endif()
