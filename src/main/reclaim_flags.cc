#include "main/reclaim_flags.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/units.h"

namespace herd {

void AddReclaimFlags(CLI::App* cmd, ReclaimFlags* f) {
  cmd->add_option("--reclaim", f->preset,
                  "Reclaim what production reserves but does not use, for non-production work (Borg §5.5): off, "
                  "baseline (cautious), medium or aggressive")
      ->capture_default_str();
  cmd->add_option("--reclaim-estimator", f->estimator,
                  "borg: a decaying peak of usage; histogram: a percentile of a decayed usage histogram (fast up, "
                  "slow down)")
      ->capture_default_str();
  cmd->add_option("--reclaim-margin", f->margin, "Safety margin over usage, e.g. 25% (default: the preset's)");
  cmd->add_option("--reclaim-half-life", f->half_life,
                  "How fast reservations come down after usage falls, e.g. 15m (default: the preset's)");
  cmd->add_option("--reclaim-startup", f->startup,
                  "A new task's reservation stays at its limit this long (default 300s)");
  cmd->add_option("--reclaim-percentile", f->percentile, "histogram: the percentile, e.g. 95 (default: the preset's)");
  cmd->add_option("--reclaim-interval", f->interval, "How often reservations are committed (default 5s)");
}

absl::Status ApplyReclaimFlags(const ReclaimFlags& f, master::Reclaimer::Options* out) {
  if (f.preset == "off") {
    out->enabled = false;
    return absl::OkStatus();
  }
  absl::StatusOr<cell::EstimatorOptions> preset = cell::EstimatorPreset(f.preset);
  if (!preset.ok()) return absl::InvalidArgumentError(absl::StrCat("--reclaim: ", preset.status().message()));
  out->enabled = true;
  out->estimator = *preset;
  if (f.estimator == "borg") {
    out->estimator.kind = cell::EstimatorOptions::Kind::kBorg;
  } else if (f.estimator == "histogram") {
    out->estimator.kind = cell::EstimatorOptions::Kind::kHistogram;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--reclaim-estimator: '", f.estimator, "' is neither borg nor histogram"));
  }
  auto percent = [](const std::string& flag, const std::string& text, double lo, double hi,
                    double* v) -> absl::Status {
    std::string t = text;
    if (!t.empty() && t.back() == '%') t.pop_back();
    double x = 0;
    if (!absl::SimpleAtod(t, &x) || x < lo || x > hi) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": '", text, "' is not a percentage from ", lo, " to ", hi));
    }
    *v = x / 100;
    return absl::OkStatus();
  };
  if (!f.margin.empty()) {
    if (absl::Status st = percent("--reclaim-margin", f.margin, 0, 1000, &out->estimator.margin); !st.ok()) return st;
  }
  if (!f.percentile.empty()) {
    if (absl::Status st = percent("--reclaim-percentile", f.percentile, 50, 100, &out->estimator.percentile);
        !st.ok()) {
      return st;
    }
  }
  for (auto [flag, text, dst, min] :
       {std::tuple{"--reclaim-half-life", &f.half_life, &out->estimator.half_life_ms, int64_t{1}},
        std::tuple{"--reclaim-startup", &f.startup, &out->estimator.startup_ms, int64_t{0}},
        std::tuple{"--reclaim-interval", &f.interval, &out->interval_ms, int64_t{100}}}) {
    if (text->empty()) continue;
    absl::StatusOr<int64_t> ms = ParseDurationMs(*text);
    if (!ms.ok() || *ms < min) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": ", ms.ok() ? absl::StrCat("must be at least ", min, "ms") : ms.status().message()));
    }
    *dst = *ms;
  }
  return absl::OkStatus();
}

}  // namespace herd
