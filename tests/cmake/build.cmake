# Build area: what the build itself produces.  No built binary searches the
# current directory for a library: every RPATH/RUNPATH entry in the build tree
# is absolute or $ORIGIN-relative, and in an installed copy $ORIGIN-relative
# (tests/scripts/check_rpath.sh; issue #8, item 3).
add_test(NAME build_rpath
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/check_rpath.sh ${CMAKE_BINARY_DIR}
                 --install)
set_tests_properties(build_rpath PROPERTIES TIMEOUT 120)
