# The shared library's ABI. The library's objects hide every symbol but those the public
# headers mark COLLIE_API; the version script then keeps only the C API and the C++ API's
# classes global, so no std:: template instance compiled into the library is exported.
# Programs that use internals link collie_static.
set_target_properties(collie_objs PROPERTIES C_VISIBILITY_PRESET hidden
                      CXX_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden
                      VISIBILITY_INLINES_HIDDEN ON)
set(COLLIE_VERSION_SCRIPT ${PROJECT_BINARY_DIR}/collie.map)
configure_file(${CMAKE_CURRENT_LIST_DIR}/collie.map.in ${COLLIE_VERSION_SCRIPT} @ONLY)
target_link_options(collie PRIVATE "LINKER:--version-script=${COLLIE_VERSION_SCRIPT}")
set_property(TARGET collie APPEND PROPERTY LINK_DEPENDS ${COLLIE_VERSION_SCRIPT})
