# Warnings and sanitizers for chorus's own targets.

# Every chorus target calls it. In an AddressSanitizer build it also gives each executable the
# sanitizer runtime's defaults (asan_default_options.cc), so that `ctest` run without the preset,
# or a test binary run by hand, behaves as under the preset.
function(chorus_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic)
  if(CHORUS_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  get_target_property(type ${target} TYPE)
  if(CHORUS_SANITIZE MATCHES "address" AND type STREQUAL "EXECUTABLE")
    target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/cmake/asan_default_options.cc)
  endif()
endfunction()

# In a sanitizer build (Debug, -O0 otherwise) a target that touches every element of large
# buffers is compiled at -O1, instrumented as before: at -O0 the conformance kit's reference
# values and comparisons (element by element through std::vector::operator[]) took about half of
# each kit run under ASan. -O1 is what the sanitizers' own documentation recommends.
function(chorus_optimize_when_sanitized target)
  if(CHORUS_SANITIZE)
    target_compile_options(${target} PRIVATE -O1)
  endif()
endfunction()

# chorus_test_compile_options(<dir> <options>): adds <options> to every target defined in a tests/
# folder at or below <dir>. The release preset compiles the test code at -Og: a test's own code
# (gtest's macros, the cases) compiled in about half the time of -O2, while the libraries,
# plugins and tools the tests drive stay at -O2.
function(chorus_test_compile_options dir options)
  get_property(subdirectories DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdirectory IN LISTS subdirectories)
    chorus_test_compile_options(${subdirectory} "${options}")
  endforeach()
  file(RELATIVE_PATH relative ${PROJECT_SOURCE_DIR} ${dir})
  if(relative MATCHES "(^|/)tests(/|$)")
    get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(target IN LISTS targets)
      get_target_property(type ${target} TYPE)
      if(type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY)$")
        target_compile_options(${target} PRIVATE ${options})
      endif()
    endforeach()
  endif()
endfunction()

if(CHORUS_SANITIZE)
  if(NOT CHORUS_SANITIZE MATCHES "^(address|undefined|thread)(,(address|undefined|thread))*$")
    message(FATAL_ERROR "CHORUS_SANITIZE='${CHORUS_SANITIZE}': use 'address,undefined' or 'thread'")
  endif()
  add_compile_options(-fsanitize=${CHORUS_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${CHORUS_SANITIZE})
  if(CHORUS_SANITIZE MATCHES "undefined")
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
endif()
