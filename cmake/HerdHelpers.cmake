# herd_library(NAME SRCS ... DEPS ...): a module library of docs/design.md §2.
include_guard(GLOBAL)

function(herd_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SRCS})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  set_property(GLOBAL APPEND PROPERTY HERD_LIBRARIES ${name})
endfunction()

# herd_test(NAME SRCS ... DEPS ... [LABELS ...] [TIMEOUT s]
#           [ROOT_CASES filter] [TRACE_CASES filter]): a GoogleTest executable
# registered with CTest (label "unit" unless given).
#
# Skips are visible: the executable's main (src/testing/gtest_main.cc) exits
# 77 when tests were skipped and none failed, which CTest reports as
# "Skipped". Cases that skip for a known reason are registered as their own
# CTest entries so that the rest never skip: ROOT_CASES (a --gtest_filter
# pattern) run as NAME.root with label "root" (they need root: namespaces,
# users, real cgroups), TRACE_CASES as NAME.traces with label "traces" (they
# read the real traces under HERD_TRACES_DIR). A whole executable that needs
# root carries the label "root" in LABELS instead. scripts/test.sh fails on
# any other skip.
function(herd_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT;ROOT_CASES;TRACE_CASES" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} herd_gtest_main)
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  set(env "HERD_BINARY=${CMAKE_BINARY_DIR}/bin/herd;HERD_BIN_DIR=${CMAKE_BINARY_DIR}/bin;HERD_SOURCE_DIR=${PROJECT_SOURCE_DIR};HERD_TRACES=${HERD_TRACES_DIR}")
  set(entries "")
  set(others "")
  foreach(kind ROOT TRACE)
    if(ARG_${kind}_CASES)
      string(TOLOWER "${kind}" label)
      if(label STREQUAL "trace")
        set(label traces)
      endif()
      add_test(NAME ${name}.${label} COMMAND ${name} --gtest_filter=${ARG_${kind}_CASES})
      set_tests_properties(${name}.${label} PROPERTIES LABELS "${ARG_LABELS};${label}")
      list(APPEND entries ${name}.${label})
      if(others)
        string(APPEND others ":")
      endif()
      string(APPEND others "${ARG_${kind}_CASES}")
    endif()
  endforeach()
  if(others)
    add_test(NAME ${name} COMMAND ${name} --gtest_filter=-${others})
  else()
    add_test(NAME ${name} COMMAND ${name})
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}")
  list(APPEND entries ${name})
  set_tests_properties(${entries} PROPERTIES TIMEOUT ${ARG_TIMEOUT} SKIP_RETURN_CODE 77 ENVIRONMENT "${env}")
  set_property(GLOBAL APPEND PROPERTY HERD_TESTS ${name})
endfunction()

include(HerdDependencies)
