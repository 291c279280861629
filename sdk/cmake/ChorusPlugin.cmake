# chorus_add_plugin(NAME <name> SOURCES <src>... [LINK_LIBRARIES <lib>...] [OUTPUT_DIRECTORY <dir>]
#                   [TARGET <target>])
#
# Builds libchorus-<name>.so, the file the chorus loader looks for: a MODULE library linked to
# chorus::sdk, with hidden visibility and a version script so that its only dynamic symbol is
# chorus_plugin_get. The target is called chorus-<name> unless TARGET names another (two builds of
# one plugin, say).
include_guard(GLOBAL)

# A cache entry so that chorus_add_plugin() sees it from any directory scope.
set(_CHORUS_PLUGIN_MAP "${CMAKE_CURRENT_LIST_DIR}/chorus-plugin.map" CACHE INTERNAL "")

function(chorus_add_plugin)
  cmake_parse_arguments(ARG "" "NAME;OUTPUT_DIRECTORY;TARGET" "SOURCES;LINK_LIBRARIES" ${ARGN})
  if(NOT ARG_NAME OR NOT ARG_NAME MATCHES "^[a-z0-9_-]+$")
    message(FATAL_ERROR "chorus_add_plugin: NAME '${ARG_NAME}' must match [a-z0-9_-]+")
  endif()
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "chorus_add_plugin(${ARG_NAME}): SOURCES is empty")
  endif()
  set(target chorus-${ARG_NAME})
  if(ARG_TARGET)
    set(target ${ARG_TARGET})
  endif()
  add_library(${target} MODULE ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    OUTPUT_NAME "chorus-${ARG_NAME}"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LINK_DEPENDS "${_CHORUS_PLUGIN_MAP}")
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  endif()
  target_link_libraries(${target} PRIVATE chorus::sdk ${ARG_LINK_LIBRARIES})
  target_link_options(${target} PRIVATE "LINKER:--version-script=${_CHORUS_PLUGIN_MAP}")
  # Every symbol resolved at link time, except in a Clang sanitizer build: Clang puts the
  # sanitizer runtime in the executable, so an instrumented plugin leaves its symbols undefined.
  get_directory_property(directory_link_options LINK_OPTIONS)
  if(NOT (CMAKE_CXX_COMPILER_ID MATCHES "Clang" AND
          "${CMAKE_CXX_FLAGS};${CMAKE_SHARED_LINKER_FLAGS};${directory_link_options}" MATCHES
          "-fsanitize="))
    target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  endif()
endfunction()
