# What `cmake --install` puts, besides each target's own install() rule: the public headers,
# the CMake package (find_package(TensorHub) -> TensorHub::tensorhub, with the components
# Fortran and MPI when their targets were built) and tensorhub.pc. Included once, at the end
# of the top-level CMakeLists.txt, so that every target of the build is known here.
include(CMakePackageConfigHelpers)

set(THUB_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/TensorHub)

# Every public header under include/tensorhub; the MPI helper's only when its library is built.
set(_thub_header_excludes)
if(NOT TARGET tensorhub_mpi)
  list(APPEND _thub_header_excludes PATTERN tensorhub_mpi.h EXCLUDE)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/tensorhub/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tensorhub
  FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp" ${_thub_header_excludes})

# The export set holds whatever was installed with EXPORT TensorHubTargets in this build
# (tensorhub always; tensorhub_fortran and tensorhub_mpi when they are built).
install(EXPORT TensorHubTargets NAMESPACE TensorHub:: DESTINATION ${THUB_INSTALL_CMAKEDIR}
  FILE TensorHubTargets.cmake)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/TensorHubConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/TensorHubConfig.cmake
  INSTALL_DESTINATION ${THUB_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_BINDIR)
# SameMajorVersion: the library's SONAME carries the major version (libtensorhub.so.0), and
# the C API only ever grows within it (docs/api.md), so any 0.y satisfies a request for 0.x
# with x <= y; a request for 1 or 99 is refused.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/TensorHubConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/TensorHubConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/TensorHubConfigVersion.cmake
        DESTINATION ${THUB_INSTALL_CMAKEDIR})

# tensorhub.pc finds its prefix from its own location (${pcfiledir}), so a tree installed with
# `cmake --install --prefix X`, staged with DESTDIR or moved afterwards is still right.
function(_thub_pc_prefix out)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
    set(${out} "${CMAKE_INSTALL_PREFIX}" PARENT_SCOPE)
  else()
    file(RELATIVE_PATH rel "/thub-prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/thub-prefix")
    string(REGEX REPLACE "/$" "" rel "${rel}")
    set(${out} "\${pcfiledir}/${rel}" PARENT_SCOPE)
  endif()
endfunction()
function(_thub_pc_dir out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "\${prefix}/${dir}" PARENT_SCOPE)
  endif()
endfunction()
_thub_pc_prefix(THUB_PC_PREFIX)
_thub_pc_dir(THUB_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
_thub_pc_dir(THUB_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/tensorhub.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/tensorhub.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/tensorhub.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# tensorhub-mpi.pc, when the MPI helper is built: its library on top of tensorhub.pc. MPI's
# own flags come from the compiler wrapper (mpicc), as for any MPI library.
if(TARGET tensorhub_mpi)
  get_target_property(THUB_PC_MPI_LIB tensorhub_mpi OUTPUT_NAME)
  if(NOT THUB_PC_MPI_LIB)
    set(THUB_PC_MPI_LIB tensorhub_mpi)
  endif()
  configure_file(${PROJECT_SOURCE_DIR}/cmake/tensorhub-mpi.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/tensorhub-mpi.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/tensorhub-mpi.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()
