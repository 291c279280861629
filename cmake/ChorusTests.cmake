# chorus_discover_tests(<target> [TEST_PREFIX <prefix>] [TEST_FILTER <suites>]
#                       [DISCOVERY_TIMEOUT <s>] [PROPERTIES <name> <value>...])
#
# For a GoogleTest binary whose cases each take a fraction of a second. With CHORUS_TEST_PER_SUITE
# OFF (the default) it is gtest_discover_tests(): one CTest test per case. With it ON (the
# presets) it registers one CTest test per suite, named "<prefix><Suite>.*" and running
# `<target> --gtest_filter=<Suite>.*`: under ASan a process's start and exit (relocating and
# loading every plugin) cost about 0.25 s, ten times what most of these cases take, so a suite in
# one process saves most of a sanitizer run's unit-test time. TEST_FILTER (a gtest filter) must
# select whole suites. The cases CHORUS_TEST_EXCLUDE names (gtest filter patterns, ':'-separated)
# are left out of every per-suite test; a suite with no case left is not registered. A suite's
# TIMEOUT is the case's TIMEOUT times its cases, at most 1500 s.
include(GoogleTest)

option(CHORUS_TEST_PER_SUITE "One CTest test per GoogleTest suite for the unit-test binaries" OFF)
set(CHORUS_TEST_EXCLUDE "" CACHE STRING
    "GoogleTest filter patterns (':'-separated) the per-suite tests leave out")

function(chorus_discover_tests target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "TEST_PREFIX;TEST_FILTER;DISCOVERY_TIMEOUT"
                        "PROPERTIES")
  if(NOT CHORUS_TEST_PER_SUITE)
    set(forwarded)
    foreach(keyword TEST_PREFIX TEST_FILTER DISCOVERY_TIMEOUT)
      if(DEFINED arg_${keyword})
        list(APPEND forwarded ${keyword} "${arg_${keyword}}")
      endif()
    endforeach()
    gtest_discover_tests(${target} ${forwarded} PROPERTIES ${arg_PROPERTIES})
    return()
  endif()

  if(NOT DEFINED arg_TEST_FILTER)
    set(arg_TEST_FILTER "*")
  endif()
  if(NOT DEFINED arg_DISCOVERY_TIMEOUT)
    set(arg_DISCOVERY_TIMEOUT 60)
  endif()
  # The properties, but TIMEOUT, which the listing scales per suite.
  set(case_timeout "")
  set(properties "")
  list(LENGTH arg_PROPERTIES count)
  if(count GREATER 0)
    math(EXPR last "${count} - 1")
    foreach(i RANGE 0 ${last} 2)
      math(EXPR j "${i} + 1")
      list(GET arg_PROPERTIES ${i} name)
      list(GET arg_PROPERTIES ${j} value)
      if(name STREQUAL "TIMEOUT")
        set(case_timeout ${value})
      else()
        string(APPEND properties " ${name} [==[${value}]==]")
      endif()
    endforeach()
  endif()

  set(directory ${CMAKE_CURRENT_BINARY_DIR})
  set(tests_file ${directory}/${target}_suites.cmake)
  set(properties_file ${directory}/${target}_suite_properties.txt)
  file(WRITE ${properties_file} "${properties}")
  add_custom_command(
    TARGET ${target} POST_BUILD BYPRODUCTS ${tests_file}
    COMMAND ${CMAKE_COMMAND} -D "EXECUTABLE=$<TARGET_FILE:${target}>" -D "PREFIX=${arg_TEST_PREFIX}"
            -D "FILTER=${arg_TEST_FILTER}" -D "EXCLUDE=${CHORUS_TEST_EXCLUDE}"
            -D "CASE_TIMEOUT=${case_timeout}" -D "DISCOVERY_TIMEOUT=${arg_DISCOVERY_TIMEOUT}"
            -D "PROPERTIES_FILE=${properties_file}" -D "WORKING_DIRECTORY=${directory}"
            -D "TESTS_FILE=${tests_file}"
            -P ${PROJECT_SOURCE_DIR}/cmake/chorus_list_test_suites.cmake
    VERBATIM)
  set(include_file ${directory}/${target}_suites_include.cmake)
  file(WRITE ${include_file}
       "if(EXISTS \"${tests_file}\")\n  include(\"${tests_file}\")\nelse()\n"
       "  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${include_file})
endfunction()
