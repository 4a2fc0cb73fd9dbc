#include "main/config_file.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace herd {
namespace {

constexpr std::uintmax_t kMaxConfigBytes = 1 << 20;

std::string At(const std::string& path, const YAML::Node& n) { return absl::StrCat(path, ":", n.Mark().line + 1); }

// Whether the command line gives `opt` (by any of its long names).
bool Given(const CLI::Option& opt, const std::vector<std::string>& command_line) {
  for (const std::string& name : opt.get_lnames()) {
    const std::string flag = "--" + name;
    for (const std::string& a : command_line) {
      if (a == flag || absl::StartsWith(a, flag + "=")) return true;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ConfigArgsFromText(const CLI::App& cmd, const std::string& text,
                                                            const std::string& path,
                                                            const std::vector<std::string>& command_line) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":", e.mark.line + 1, ": ", e.msg));
  }
  if (root.IsNull()) return std::vector<std::string>{};
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(At(path, root), ": expected a map of flag: value (herd ", cmd.get_name(), "'s flags, without --)"));
  }
  std::vector<std::string> out;
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    const YAML::Node& v = kv.second;
    const CLI::Option* opt = key.empty() || absl::StartsWith(key, "-") ? nullptr : cmd.get_option_no_throw("--" + key);
    if (opt == nullptr || key == "config" || key == "help") {
      return absl::InvalidArgumentError(absl::StrCat(At(path, kv.first), ": ", key, ": not a flag of herd ",
                                                     cmd.get_name(), " (keys are its flags without --; see herd ",
                                                     cmd.get_name(), " --help)"));
    }
    if (Given(*opt, command_line)) continue;  // the command line wins
    const std::string flag = "--" + key;
    const bool switch_flag = opt->get_expected_min() == 0;
    if (v.IsMap() || !v.IsDefined() || v.IsNull()) {
      return absl::InvalidArgumentError(
          absl::StrCat(At(path, v.IsDefined() ? v : kv.first), ": ", key, ": expected a value or a list of values"));
    }
    if (switch_flag) {
      bool on = false;
      if (!v.IsScalar() || !YAML::convert<bool>::decode(v, on)) {
        return absl::InvalidArgumentError(absl::StrCat(At(path, v), ": ", key, ": expected true or false"));
      }
      if (on) out.push_back(flag);
      continue;
    }
    if (v.IsSequence()) {
      if (opt->get_items_expected_max() <= 1 && opt->get_multi_option_policy() != CLI::MultiOptionPolicy::TakeAll) {
        return absl::InvalidArgumentError(absl::StrCat(At(path, v), ": ", key, ": takes one value, not a list"));
      }
      for (const YAML::Node& item : v) {
        if (!item.IsScalar()) {
          return absl::InvalidArgumentError(absl::StrCat(At(path, item), ": ", key, ": expected a list of values"));
        }
        out.push_back(flag);
        out.push_back(item.Scalar());
      }
      continue;
    }
    out.push_back(flag);
    out.push_back(v.Scalar());
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ConfigArgs(const CLI::App& cmd, const std::string& path,
                                                    const std::vector<std::string>& command_line) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("--config ", path, ": ", ec.message()));
  if (size > kMaxConfigBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--config ", path, ": ", size, " bytes; the limit is ", kMaxConfigBytes));
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return absl::NotFoundError(absl::StrCat("--config ", path, ": cannot read it"));
  return ConfigArgsFromText(cmd, text.str(), path, command_line);
}

void AddConfigFlag(CLI::App* cmd) {
  cmd->add_option("--config")
      ->type_name("FILE")
      ->description(
          "A YAML file of flags, each key a flag without its dashes (docs/operating.md, \"Configuration files\"); "
          "flags on the command line win");
}

absl::StatusOr<std::vector<std::string>> ExpandConfig(const CLI::App& app, std::vector<std::string> args) {
  if (args.empty()) return args;
  const CLI::App* cmd = nullptr;
  try {
    cmd = app.get_subcommand(args[0]);
  } catch (const CLI::OptionNotFound&) {
    return args;
  }
  if (cmd == nullptr || cmd->get_option_no_throw("--config") == nullptr) return args;
  std::string path;
  size_t count = 0;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) {
      path = args[i + 1];
      ++count;
    } else if (absl::StartsWith(args[i], "--config=")) {
      path = args[i].substr(9);
      ++count;
    }
  }
  if (count == 0) return args;
  if (count > 1) return absl::InvalidArgumentError("--config is given more than once");
  absl::StatusOr<std::vector<std::string>> extra = ConfigArgs(*cmd, path, args);
  if (!extra.ok()) return extra.status();
  args.insert(args.end(), extra->begin(), extra->end());
  return args;
}

}  // namespace herd
