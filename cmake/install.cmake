# `cmake --install build --prefix DIR`: megatron.cpp as a CMake package.
#   DIR/include/megatron/*.h               the public headers (and only those)
#   DIR/lib/libmt_*.a                      the static libraries, one per folder of src/
#   DIR/lib/cmake/megatron_cpp/            megatron_cppConfig.cmake, its version, the
#                                          exported targets and megatron_cpp_deps.cmake
# A project then writes find_package(megatron_cpp REQUIRED) and links the one
# target megatron_cpp::megatron_cpp (examples/custom_block). The folder
# libraries come along as its link dependencies (megatron_cpp::mt_*); their
# headers stay in the source tree: only include/megatron is public.
include(CMakePackageConfigHelpers)
include(GNUInstallDirs)

set(mt_package_libs mt_core mt_backend mt_kernels mt_comm mt_data mt_chat mt_parallel mt_model
    mt_optim mt_checkpoint mt_pipeline mt_args mt_memory mt_observe mt_train mt_plan mt_convert
    mt_serve mt_flags mt_decoding mt_wizard mt_api)
if(TARGET mt_kernels_cuda)  # MT_CUDA: the kernels' CUDA twins
  # An exported target may not name the source tree for its users: src/ is
  # for this build only (the installed package has include/megatron alone).
  set_property(TARGET mt_kernels_cuda PROPERTY INTERFACE_INCLUDE_DIRECTORIES
               $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/src>)
  list(APPEND mt_package_libs mt_kernels_cuda)
endif()

add_library(megatron_cpp INTERFACE)
target_link_libraries(megatron_cpp INTERFACE mt_api)
target_include_directories(megatron_cpp INTERFACE $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include>
                           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(megatron_cpp INTERFACE cxx_std_17)
# A sanitized build's libraries need the sanitizers' runtimes in whatever links them
# (scripts/sanitize.sh runs tests/package's example against them too).
if(MT_SANITIZE OR MT_FUZZ)
  target_link_options(megatron_cpp INTERFACE ${mt_san})
endif()
add_library(megatron_cpp::megatron_cpp ALIAS megatron_cpp)

install(TARGETS megatron_cpp ${mt_package_libs} EXPORT megatron_cppTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/megatron DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(mt_package_dir ${CMAKE_INSTALL_LIBDIR}/cmake/megatron_cpp)
install(EXPORT megatron_cppTargets NAMESPACE megatron_cpp:: DESTINATION ${mt_package_dir})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/megatron_cppConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/megatron_cppConfig.cmake
                              INSTALL_DESTINATION ${mt_package_dir})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/megatron_cppConfigVersion.cmake
                                 VERSION 0.1 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/megatron_cppConfig.cmake
              ${CMAKE_BINARY_DIR}/megatron_cppConfigVersion.cmake
              ${CMAKE_SOURCE_DIR}/cmake/megatron_cpp_deps.cmake
        DESTINATION ${mt_package_dir})
