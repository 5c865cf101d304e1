# MPI, for perf/compare's OpenMPI peer driver. FindMPI trusts the compiler wrapper, which
# openmpi-bin installs without mpi.h: the wrapper must first build a program itself.
set(COLLIE_HAVE_MPI OFF)
if(NOT COLLIE_WITH_MPI STREQUAL "OFF")
  find_program(COLLIE_MPICC NAMES mpicc NO_CACHE)
  set(probe_dir ${CMAKE_BINARY_DIR}/CMakeFiles/collie-mpi-probe)
  file(MAKE_DIRECTORY ${probe_dir})
  file(WRITE ${probe_dir}/probe.c
       "#include <mpi.h>\nint main(int c, char** v) { MPI_Init(&c, &v); return MPI_Finalize(); }\n")
  set(mpicc_ok 1)
  if(COLLIE_MPICC)
    execute_process(COMMAND ${COLLIE_MPICC} probe.c -o probe WORKING_DIRECTORY ${probe_dir}
                    RESULT_VARIABLE mpicc_ok OUTPUT_QUIET ERROR_QUIET)
  endif()
  if(NOT COLLIE_MPICC)
    collie_part_absent(MPI "no mpicc" "apt-get install libopenmpi-dev")
  elseif(NOT mpicc_ok EQUAL 0)
    collie_part_absent(MPI "${COLLIE_MPICC} cannot build a program (mpi.h or libmpi missing)"
                       "apt-get install libopenmpi-dev")
  else()
    set(MPI_C_COMPILER ${COLLIE_MPICC})
    find_package(MPI COMPONENTS C QUIET)
    if(MPI_C_FOUND)
      set(COLLIE_HAVE_MPI ON)
    else()
      collie_part_absent(MPI "FindMPI rejected ${COLLIE_MPICC}" "apt-get install libopenmpi-dev")
    endif()
  endif()
endif()
