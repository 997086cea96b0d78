# `cmake --install` rules and the CMake package, so other projects can use
#   find_package(vkformer CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE vkformer::vkformer)
# and a pkg-config file for builds without CMake: cc app.c $(pkg-config --cflags --libs vkformer)
include(CMakePackageConfigHelpers)

set(VKF_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/vkformer)

install(TARGETS vkformer EXPORT vkformerTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/vkformer
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h" PATTERN "*.def"
  PATTERN "server.hpp" EXCLUDE)  # its library, vkformer_server, is not installed (yet)
install(EXPORT vkformerTargets
  NAMESPACE vkformer::
  DESTINATION ${VKF_CMAKE_INSTALL_DIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/vkformerConfig.cmake.in
  ${PROJECT_BINARY_DIR}/vkformerConfig.cmake
  INSTALL_DESTINATION ${VKF_CMAKE_INSTALL_DIR})
# Before 1.0 a minor version may change the API, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/vkformerConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/vkformerConfig.cmake
              ${PROJECT_BINARY_DIR}/vkformerConfigVersion.cmake
  DESTINATION ${VKF_CMAKE_INSTALL_DIR})

# vkformer.pc, relocatable: the prefix is found from the file's own place. A static library
# lists what its link needs: utf8proc (the tokenizers), the dynamic loader's library where it
# is separate (Vulkan is opened at run time) and, for C programs, the C++ runtime.
file(RELATIVE_PATH VKF_PC_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" VKF_PC_PREFIX "${VKF_PC_PREFIX}")
set(VKF_PC_LIBS "-lvkformer")
set(VKF_PC_REQUIRES "")
set(VKF_PC_REQUIRES_PRIVATE "libutf8proc")
if(NOT BUILD_SHARED_LIBS)
  foreach(lib IN LISTS CMAKE_DL_LIBS VKF_CXX_RUNTIME)
    string(APPEND VKF_PC_LIBS " -l${lib}")
  endforeach()
  set(VKF_PC_REQUIRES "libutf8proc")
  set(VKF_PC_REQUIRES_PRIVATE "")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/vkformer.pc.in ${PROJECT_BINARY_DIR}/vkformer.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/vkformer.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
