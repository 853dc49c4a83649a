# Install and export rules (SDK engineer): headers, liblazytensor (versioned SONAME), the
# LazyTensor::{core,plugin_api,cpp,onnx} targets, LazyTensorConfig.cmake + version file, the
# lt_add_plugin() helper, lazytensor{,-cpp,-plugin}.pc and the example plugin's sources.
# Included last from the top-level CMakeLists.txt so
# every target it names already exists. The tree is relocatable: nothing below records an
# absolute prefix (the core finds plugins relative to itself, tools use $ORIGIN rpaths).
include(CMakePackageConfigHelpers)

set(LT_CMAKE_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/LazyTensor")

install(DIRECTORY "${PROJECT_SOURCE_DIR}/core/include/lazytensor"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}" FILES_MATCHING PATTERN "*.h" PATTERN "*.def")
install(DIRECTORY "${PROJECT_SOURCE_DIR}/core/lower/include/lazytensor"
                  "${PROJECT_SOURCE_DIR}/core/kit/include/lazytensor"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}" FILES_MATCHING PATTERN "*.hpp")
install(DIRECTORY "${PROJECT_SOURCE_DIR}/api/include/lazytensor"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}" FILES_MATCHING PATTERN "*.hpp")

set(lt_export_targets lazytensor_plugin_api lazytensor_lower lazytensor_plugin_kit)
if(TARGET lazytensor)
  list(APPEND lt_export_targets lazytensor)
endif()
if(TARGET lazytensor_cpp)
  list(APPEND lt_export_targets lazytensor_cpp)
endif()
if(TARGET lazytensor_onnx)
  list(APPEND lt_export_targets lazytensor_onnx)
  install(DIRECTORY "${PROJECT_SOURCE_DIR}/onnx/include/lazytensor"
          DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}" FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
endif()
install(TARGETS ${lt_export_targets} EXPORT LazyTensorTargets
        LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}" NAMELINK_COMPONENT Development
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
        RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}"
        INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(EXPORT LazyTensorTargets NAMESPACE LazyTensor:: DESTINATION "${LT_CMAKE_INSTALL_DIR}")

# Installed executables find liblazytensor next to them, wherever the prefix is moved.
foreach(tool lt-info lt-run lt-conformance lt-onnx)
  if(TARGET ${tool})
    set_target_properties(${tool} PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
  endif()
endforeach()

configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/LazyTensorConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/LazyTensorConfig.cmake" INSTALL_DESTINATION "${LT_CMAKE_INSTALL_DIR}"
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/LazyTensorConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES "${PROJECT_BINARY_DIR}/LazyTensorConfig.cmake"
              "${PROJECT_BINARY_DIR}/LazyTensorConfigVersion.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/LazyTensorPlugin.cmake"
        DESTINATION "${LT_CMAKE_INSTALL_DIR}")

configure_file("${PROJECT_SOURCE_DIR}/cmake/lazytensor.pc.in"
               "${PROJECT_BINARY_DIR}/lazytensor.pc" @ONLY)
configure_file("${PROJECT_SOURCE_DIR}/cmake/lazytensor-cpp.pc.in"
               "${PROJECT_BINARY_DIR}/lazytensor-cpp.pc" @ONLY)
configure_file("${PROJECT_SOURCE_DIR}/cmake/lazytensor-plugin.pc.in"
               "${PROJECT_BINARY_DIR}/lazytensor-plugin.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/lazytensor.pc" "${PROJECT_BINARY_DIR}/lazytensor-cpp.pc"
              "${PROJECT_BINARY_DIR}/lazytensor-plugin.pc"
        DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")

# The example backend, as a plugin author starts from it (docs/writing-a-backend.md): its
# CMakeLists.txt builds it against the installed package with find_package(LazyTensor).
install(FILES "${PROJECT_SOURCE_DIR}/examples/external_plugin/CMakeLists.txt"
              "${PROJECT_SOURCE_DIR}/examples/external_plugin/toy_plugin.cpp"
              "${PROJECT_SOURCE_DIR}/examples/external_plugin/toy_demo.c"
        DESTINATION "${CMAKE_INSTALL_DATADIR}/lazytensor/examples/external_plugin")
