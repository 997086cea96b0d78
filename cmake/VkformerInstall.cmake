# `cmake --install` rules and the CMake package, so other projects can use
#   find_package(vkformer CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE vkformer::vkformer)
include(CMakePackageConfigHelpers)

set(VKF_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/vkformer)

install(TARGETS vkformer EXPORT vkformerTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/vkformer
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
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
