#pragma once

// HERD_EXHAUSTIVE_BEGIN / HERD_EXHAUSTIVE_END around a switch over an enum
// (a Mutation's kind_case(), say) make every enumerator the switch does not
// name a compile error, even when it has a `default:`. A switch that must see
// every mutation kind is written without `default:` inside them, so adding a
// kind breaks the build at each place that must decide what the kind means
// (CONTRIBUTING.md, "Adding a mutation kind"). cmake/check_switches.sh checks
// that every switch over a Mutation's kind is so wrapped.
#define HERD_EXHAUSTIVE_BEGIN                                                                     \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic error \"-Wswitch\"") \
      _Pragma("GCC diagnostic error \"-Wswitch-enum\"")
#define HERD_EXHAUSTIVE_END _Pragma("GCC diagnostic pop")
