#include "spec/jsonnet/evaluate.h"

#include <libjsonnet++.h>

#include "absl/strings/ascii.h"

namespace herd::spec::jsonnet {
namespace {

// Stack frames printed for a runtime error; enough to find the call site.
constexpr uint32_t kMaxTrace = 20;

template <typename Fn>
absl::StatusOr<std::string> Run(Fn evaluate) {
  ::jsonnet::Jsonnet vm;
  if (!vm.init()) return absl::InternalError("could not start the Jsonnet interpreter");
  vm.setMaxTrace(kMaxTrace);
  std::string out;
  if (!evaluate(vm, &out)) {
    return absl::InvalidArgumentError(std::string(absl::StripTrailingAsciiWhitespace(vm.lastError())));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> EvaluateFile(const std::string& path) {
  return Run([&](::jsonnet::Jsonnet& vm, std::string* out) { return vm.evaluateFile(path, out); });
}

absl::StatusOr<std::string> EvaluateSnippet(absl::string_view code, absl::string_view source_name) {
  return Run([&](::jsonnet::Jsonnet& vm, std::string* out) {
    return vm.evaluateSnippet(std::string(source_name), std::string(code), out);
  });
}

}  // namespace herd::spec::jsonnet
