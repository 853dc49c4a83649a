# lt_add_plugin(<name> <sources>...): builds lt_plugin_<name>, a MODULE library against the
# plugin ABI only, placed where the core searches for plugins. Used in-tree and, through
# LazyTensorConfig.cmake, by third-party backends.
function(lt_add_plugin name)
  set(target lt_plugin_${name})
  add_library(${target} MODULE ${ARGN})
  if(TARGET LazyTensor::plugin_api)
    target_link_libraries(${target} PRIVATE LazyTensor::plugin_api)
  endif()
  set_target_properties(${target} PROPERTIES PREFIX "lib" OUTPUT_NAME "lt_plugin_${name}"
                                             CXX_VISIBILITY_PRESET hidden
                                             C_VISIBILITY_PRESET hidden)
  if(DEFINED LT_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${LT_PLUGIN_OUTPUT_DIR}")
  endif()
  if(DEFINED LT_PLUGIN_SUBDIR AND NOT LT_ADD_PLUGIN_NO_INSTALL)
    install(TARGETS ${target} LIBRARY DESTINATION "${LT_PLUGIN_SUBDIR}")
  endif()
endfunction()
