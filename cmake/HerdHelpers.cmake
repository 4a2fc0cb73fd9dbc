# herd_library(NAME SRCS ... DEPS ...): a module library of DESIGN §3.
# herd_test(NAME SRCS ... DEPS ... [LABELS ...] [TIMEOUT s]): a GoogleTest
# executable registered with CTest (label "unit" unless given).
include_guard(GLOBAL)

function(herd_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SRCS})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  set_property(GLOBAL APPEND PROPERTY HERD_LIBRARIES ${name})
endfunction()

function(herd_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  add_test(NAME ${name} COMMAND ${name})
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT "HERD_BINARY=${CMAKE_BINARY_DIR}/bin/herd;HERD_BIN_DIR=${CMAKE_BINARY_DIR}/bin;HERD_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  set_property(GLOBAL APPEND PROPERTY HERD_TESTS ${name})
endfunction()

include(HerdDependencies)
