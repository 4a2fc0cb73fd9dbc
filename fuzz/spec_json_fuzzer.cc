// Fuzz target: JSON job spec text -> validated JobSpecs (spec::ParseText,
// Format::kJson: the YAML reader, then a strict JSON check). Nothing may
// crash; every spec it returns has passed Validate() and names its source.
#include "spec_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  herd::fuzz::Quiet();
  herd::fuzz::CheckParse(herd::fuzz::AsText(data, size), "fuzz.json", herd::spec::Format::kJson);
  return 0;
}
