// Fuzz target: YAML job spec text -> validated JobSpecs (spec::ParseText,
// Format::kYaml), what `herd submit web.yaml` runs on a user's file.
// Nothing may crash; every spec it returns has passed Validate() and names
// its source.
#include "spec_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  herd::fuzz::Quiet();
  herd::fuzz::CheckParse(herd::fuzz::AsText(data, size), "fuzz.yaml", herd::spec::Format::kYaml);
  return 0;
}
