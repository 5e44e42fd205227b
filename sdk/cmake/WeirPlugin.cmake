# WeirPlugin.cmake - build a weir plugin the same way first- and third-party
# plugins are built.
#
#   weir_add_plugin(<name> SOURCES a.c b.c [LIBS libs...] [NO_INSTALL]
#                   [OUTPUT_DIRECTORY dir])
#
# Produces weir-<name>.so (a MODULE library): hidden visibility, so it exports
# only weir_plugin_describe; linked with -z defs against jansson (plugins
# never link libweir).  Inside the weir tree it lands in lib/weir/plugins/
# and links the in-tree weir_headers target; from the installed package
# (find_package(weir)) it links weir::headers and installs to
# ${WEIR_PLUGIN_INSTALL_DIR} (set by weirConfig.cmake).  A consumer that
# builds with -fsanitize sets WEIR_SANITIZE too: the sanitizer runtime then
# comes from the host executable, so -z defs is dropped.
#
# RPATH: an installed plugin is linked once with its install RPATH, which is
# the directories outside the project of the libraries it links (LIBS from
# /opt/foo/lib, say); system directories need none.  So the install step
# never rewrites it: CMake's rewrite pads the build tree's RPATH with a
# trailing ':', an empty entry that ld.so reads as the current directory.
# A plugin that links a shared library built in its own project sets
# INSTALL_RPATH itself ($ORIGIN/..., where that library is installed).
include_guard(GLOBAL)

function(weir_add_plugin name)
  cmake_parse_arguments(WP "NO_INSTALL" "OUTPUT_DIRECTORY" "SOURCES;LIBS" ${ARGN})
  set(target weir-${name})
  add_library(${target} MODULE ${WP_SOURCES})
  set_target_properties(${target} PROPERTIES PREFIX "" OUTPUT_NAME weir-${name}
                        C_VISIBILITY_PRESET hidden)
  if(WP_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${WP_OUTPUT_DIRECTORY})
  elseif(DEFINED WEIR_PLUGIN_BUILD_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${WEIR_PLUGIN_BUILD_DIR})
  endif()
  if(TARGET weir_headers)
    target_link_libraries(${target} PRIVATE weir_headers)
  elseif(TARGET weir::headers)
    target_link_libraries(${target} PRIVATE weir::headers)
  endif()
  if(TARGET PkgConfig::JANSSON)
    target_link_libraries(${target} PRIVATE PkgConfig::JANSSON)
  endif()
  foreach(t weir_warnings weir_sanitize)
    if(TARGET ${t})
      target_link_libraries(${target} PRIVATE ${t})
    endif()
  endforeach()
  target_link_libraries(${target} PRIVATE ${WP_LIBS})
  # Under sanitizers the runtime comes from the host executable.
  if(NOT WEIR_SANITIZE)
    target_link_options(${target} PRIVATE -Wl,-z,defs)
  endif()
  if(NOT WP_NO_INSTALL AND DEFINED WEIR_PLUGIN_INSTALL_DIR)
    set_target_properties(${target} PROPERTIES BUILD_WITH_INSTALL_RPATH ON
                          INSTALL_RPATH_USE_LINK_PATH ON)
    install(TARGETS ${target} LIBRARY DESTINATION ${WEIR_PLUGIN_INSTALL_DIR})
  endif()
endfunction()
