# Build area: what the build itself produces.  No built binary searches the
# current directory for a library: every RPATH/RUNPATH entry in the build tree
# is absolute or $ORIGIN-relative, and in an installed copy $ORIGIN-relative
# (tests/scripts/check_rpath.sh; issue #8, item 3).
#
# The check reads the binaries this build makes, never the whole tree (the
# MCP servers' node_modules alone are thousands of files, issue #37 item 1):
# <build>/built-binaries.txt lists the file of every executable, shared and
# module library target, written at generate time once every directory has
# been read (a deferred call at the end of the top directory).
function(weir_list_built_binaries)
  set(_content "")
  set(_dirs ${PROJECT_SOURCE_DIR})
  while(_dirs)
    list(POP_FRONT _dirs _dir)
    get_property(_subs DIRECTORY ${_dir} PROPERTY SUBDIRECTORIES)
    list(APPEND _dirs ${_subs})
    get_property(_targets DIRECTORY ${_dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(_t ${_targets})
      get_target_property(_type ${_t} TYPE)
      if(_type MATCHES "^(EXECUTABLE|SHARED_LIBRARY|MODULE_LIBRARY)$")
        string(APPEND _content "$<TARGET_FILE:${_t}>\n")
      endif()
    endforeach()
  endwhile()
  file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/built-binaries.txt CONTENT "${_content}")
endfunction()
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL weir_list_built_binaries)

add_test(NAME build_rpath
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/check_rpath.sh ${CMAKE_BINARY_DIR}
                 --install)
set_tests_properties(build_rpath PROPERTIES TIMEOUT 120)
# The check still finds what it must: a relative or empty entry in a listed
# binary, and only in the listed ones.
add_test(NAME build_rpath_negative
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/check_rpath_negative.sh
                 ${CMAKE_CURRENT_SOURCE_DIR}/scripts/check_rpath.sh ${CMAKE_C_COMPILER})
set_tests_properties(build_rpath_negative PROPERTIES TIMEOUT 60)

# `make demo` and `make test` build quietly, with a progress line
# (cmake/quiet-build.sh; issue #37 item 4).
add_test(NAME quiet_build
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/quiet_build.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(quiet_build PROPERTIES TIMEOUT 120)
