// The scheduler's knobs (sched/config/knobs.h) as CLI11 flags: the one
// place `herd master`, `herd scheduler`, `herd sim` and `herd bench
// scheduler` get them from.
//
//   auto flags = std::make_shared<sched::SchedulerFlags>();
//   flags->AddTo(cmd);
//   ... in the command's callback:
//   if (absl::Status st = flags->Apply(&options.scheduler); !st.ok()) ... exit 2
#pragma once

#include <CLI/CLI.hpp>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sched/config/knobs.h"

namespace herd::sched {

class SchedulerFlags {
 public:
  explicit SchedulerFlags(const Registry& r = Registry::BuiltIn()) : registry_(&r), knobs_(SchedulerKnobs(r)) {}
  SchedulerFlags(const SchedulerFlags&) = delete;  // CLI11 holds pointers into it
  SchedulerFlags& operator=(const SchedulerFlags&) = delete;

  // Every knob as a flag of `cmd`, under the group "Scheduler".
  void AddTo(CLI::App* cmd) {
    for (const Knob& k : knobs_) {
      Slot& s = slots_.emplace_back();
      std::vector<std::string> names{k.flag};
      names.insert(names.end(), k.aliases.begin(), k.aliases.end());
      const std::string spec = absl::StrJoin(names, ",");
      if (k.takes_value) {
        s.option = cmd->add_option(spec, s.value, k.help);
        if (!k.default_text.empty()) s.option->default_str(k.default_text);
      } else {
        s.option = cmd->add_flag(spec, s.on, k.help);
      }
      s.option->group("Scheduler");
    }
  }

  // Applies the flags given to `o` (the profile first, the others over
  // it). INVALID_ARGUMENT naming the flag.
  absl::Status Apply(Options* o) const {
    std::vector<std::optional<std::string>> given(knobs_.size());
    for (size_t i = 0; i < slots_.size() && i < knobs_.size(); ++i) {
      if (slots_[i].option == nullptr || slots_[i].option->count() == 0) continue;
      given[i] = knobs_[i].takes_value ? slots_[i].value : "";
    }
    if (o->registry == nullptr && registry_ != &Registry::BuiltIn()) o->registry = registry_;
    return ApplyKnobs(knobs_, given, o);
  }

 private:
  struct Slot {
    std::string value;
    bool on = false;
    CLI::Option* option = nullptr;
  };
  const Registry* registry_;
  std::vector<Knob> knobs_;
  std::deque<Slot> slots_;  // stable addresses: CLI11 writes into them
};

}  // namespace herd::sched
