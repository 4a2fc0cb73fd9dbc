#include "metrics/registry.h"

#include <set>
#include <sstream>
#include <stdexcept>
#include <variant>

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace herd::metrics {

void Counter::Inc(double by) const {
  if (c_ != nullptr && by >= 0) c_->Increment(by);
}
double Counter::Value() const { return c_ == nullptr ? 0 : c_->Value(); }

void Gauge::Set(double v) const {
  if (g_ != nullptr) g_->Set(v);
}
void Gauge::Add(double by) const {
  if (g_ != nullptr) g_->Increment(by);
}
double Gauge::Value() const { return g_ == nullptr ? 0 : g_->Value(); }

void Histogram::Observe(double v) const {
  if (h_ != nullptr) h_->Observe(v);
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> out;
  double v = start;
  for (int i = 0; i < count; ++i, v *= factor) out.push_back(v);
  return out;
}

std::vector<double> LatencyBuckets() { return ExponentialBuckets(0.0005, 2, 16); }

struct Registry::Family {
  std::string name;
  Type type;
  std::variant<prometheus::Family<prometheus::Counter>*, prometheus::Family<prometheus::Gauge>*,
               prometheus::Family<prometheus::Histogram>*>
      family;
  std::set<Labels> series;
};

namespace {

constexpr char kDropped[] = "herd_metrics_series_dropped_total";

prometheus::Labels ToProm(const Labels& l) { return prometheus::Labels(l.begin(), l.end()); }

}  // namespace

Registry::Registry(size_t max_series)
    : max_series_(max_series), registry_(std::make_unique<prometheus::Registry>()) {}

Registry::~Registry() = default;

Registry::Family* Registry::FamilyFor(const std::string& name, const std::string& help, Type type) {
  auto it = families_.find(name);
  if (it != families_.end()) {
    if (it->second->type != type) {
      HERD_BUG(absl::StrCat("metric ", name, " used with two types"));
      return nullptr;
    }
    return it->second.get();
  }
  auto f = std::make_unique<Family>();
  f->name = name;
  f->type = type;
  try {
    switch (type) {
      case Type::kCounter:
        f->family = &prometheus::BuildCounter().Name(name).Help(help).Register(*registry_);
        break;
      case Type::kGauge:
        f->family = &prometheus::BuildGauge().Name(name).Help(help).Register(*registry_);
        break;
      case Type::kHistogram:
        f->family = &prometheus::BuildHistogram().Name(name).Help(help).Register(*registry_);
        break;
    }
  } catch (const std::exception& e) {
    HERD_BUG(absl::StrCat("metric ", name, ": ", e.what()));
    return nullptr;
  }
  return families_.emplace(name, std::move(f)).first->second.get();
}

bool Registry::Admit(Family& family, const Labels& labels) {
  if (family.series.contains(labels)) return true;
  if (family.series.size() < max_series_) {
    family.series.insert(labels);
    return true;
  }
  // Over the bound: counted per family (a handful of families, so this
  // counter's own labels are bounded).
  Family* dropped = FamilyFor(kDropped, "Label sets not recorded because their family held too many", Type::kCounter);
  if (dropped != nullptr && dropped != &family) {
    std::get<0>(dropped->family)->Add({{"family", family.name}}).Increment();
  }
  return false;
}

template <typename Handle, typename Metric, typename... Args>
Handle Registry::Get(const std::string& name, const std::string& help, Type type, const Labels& labels,
                     const Args&... args) {
  absl::MutexLock l(&mu_);
  Family* f = FamilyFor(name, help, type);
  if (f == nullptr || !Admit(*f, labels)) return Handle();
  try {
    return Handle(&std::get<prometheus::Family<Metric>*>(f->family)->Add(ToProm(labels), args...));
  } catch (const std::exception& e) {
    f->series.erase(labels);
    HERD_BUG(absl::StrCat("metric ", name, ": ", e.what()));
    return Handle();
  }
}

Counter Registry::GetCounter(const std::string& name, const std::string& help, const Labels& labels) {
  return Get<Counter, prometheus::Counter>(name, help, Type::kCounter, labels);
}

Gauge Registry::GetGauge(const std::string& name, const std::string& help, const Labels& labels) {
  return Get<Gauge, prometheus::Gauge>(name, help, Type::kGauge, labels);
}

Histogram Registry::GetHistogram(const std::string& name, const std::string& help, const std::vector<double>& buckets,
                                 const Labels& labels) {
  return Get<Histogram, prometheus::Histogram>(name, help, Type::kHistogram, labels, buckets);
}

void Registry::RetainGauges(const std::string& name, const std::function<bool(const Labels&)>& keep) {
  absl::MutexLock l(&mu_);
  auto it = families_.find(name);
  if (it == families_.end() || it->second->type != Type::kGauge) return;
  Family& f = *it->second;
  auto* pf = std::get<1>(f.family);
  for (auto s = f.series.begin(); s != f.series.end();) {
    if (keep(*s)) {
      ++s;
      continue;
    }
    pf->Remove(&pf->Add(ToProm(*s)));
    s = f.series.erase(s);
  }
}

void Registry::OnCollect(std::function<void()> fn) {
  absl::MutexLock l(&mu_);
  on_collect_.push_back(std::move(fn));
}

std::string Registry::Text() {
  absl::MutexLock one(&collect_mu_);
  std::vector<std::function<void()>> hooks;
  {
    absl::MutexLock l(&mu_);
    hooks = on_collect_;
  }
  for (const auto& fn : hooks) fn();  // they take mu_ themselves
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace herd::metrics
