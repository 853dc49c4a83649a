# lt_add_child_dirs(): add_subdirectory() for every immediate child directory that has a
# CMakeLists.txt, in name order. Lets tests/, tools/, benchmarks/ and examples/ grow one
# folder per unit without a central list to edit.
function(lt_add_child_dirs)
  file(GLOB children LIST_DIRECTORIES true RELATIVE "${CMAKE_CURRENT_SOURCE_DIR}"
       "${CMAKE_CURRENT_SOURCE_DIR}/*")
  list(SORT children)
  foreach(child IN LISTS children)
    if(IS_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}/${child}"
       AND EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/${child}/CMakeLists.txt")
      add_subdirectory(${child})
    endif()
  endforeach()
endfunction()
