# UCX: the headers at build time; libucp itself is loaded at run time (dlopen) by the
# communicators that use it, so programs that never do are not touched by it. A program
# that links libucp proves both are whole.
set(COLLIE_HAVE_UCX OFF)
if(NOT COLLIE_WITH_UCX STREQUAL "OFF")
  find_path(COLLIE_UCX_INCLUDE_DIR ucp/api/ucp.h)
  find_library(COLLIE_UCP_LIBRARY ucp)
  if(NOT COLLIE_UCX_INCLUDE_DIR OR NOT COLLIE_UCP_LIBRARY)
    collie_part_absent(UCX "no ucp/api/ucp.h or libucp" "apt-get install libucx-dev")
  else()
    collie_test_program(ucx_ok ucx.c
      "#include <ucp/api/ucp.h>\nint main(void) { unsigned a, b, c; ucp_get_version(&a, &b, &c); return 0; }\n"
      INCLUDES ${COLLIE_UCX_INCLUDE_DIR} LIBRARIES ${COLLIE_UCP_LIBRARY})
    if(ucx_ok)
      set(COLLIE_HAVE_UCX ON)
    else()
      collie_part_absent(UCX "a program with ${COLLIE_UCP_LIBRARY} does not build"
                         "apt-get install libucx-dev")
    endif()
  endif()
endif()
