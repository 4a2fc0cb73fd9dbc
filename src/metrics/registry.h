// Metrics for Prometheus: counters, gauges and histograms with fixed buckets,
// kept in memory and written out in the text exposition format (version
// 0.0.4) when scraped (https/https_server.h serves them over HTTPS).
//
// A thin layer over prometheus-cpp's core (Debian's prometheus-cpp-dev),
// which does the atomics and the exposition; what Herd adds:
//  - handles (Counter, Gauge, Histogram) that cost one pointer, are cheap to
//    copy and, default-constructed, do nothing: a part built without a
//    registry (the simulator, a unit test) updates nothing;
//  - a bound on series: each family holds at most `max_series` label sets;
//    past it, new label sets get a handle that does nothing and are counted
//    in herd_metrics_series_dropped_total{family=...}, so a label fed from
//    outside (a job's name) cannot grow the master's memory without end;
//  - collect hooks: gauges computed from state when scraped (machines by
//    state) rather than kept up to date on every change;
//  - no exceptions: prometheus-cpp throws on invalid names; here a bad name
//    is a bug reported once (HERD_BUG) and yields a handle that does nothing.
//
// Naming follows Prometheus's conventions: a herd_ prefix, base units
// (seconds, bytes), _total on counters, _seconds and _bytes suffixes.
//
// Thread-safe. Updates through a handle are lock-free (atomics) for
// counters and gauges and take a short per-histogram lock for histograms;
// getting a handle looks up a family and its label set under a lock, so hot
// paths get their handles once and keep them.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
}  // namespace prometheus

namespace herd::metrics {

using Labels = std::map<std::string, std::string>;

class Counter {
 public:
  Counter() = default;
  void Inc(double by = 1) const;  // by >= 0
  double Value() const;           // 0 for a handle that does nothing

 private:
  friend class Registry;
  explicit Counter(prometheus::Counter* c) : c_(c) {}
  prometheus::Counter* c_ = nullptr;
};

class Gauge {
 public:
  Gauge() = default;
  void Set(double v) const;
  void Add(double by) const;
  double Value() const;

 private:
  friend class Registry;
  explicit Gauge(prometheus::Gauge* g) : g_(g) {}
  prometheus::Gauge* g_ = nullptr;
};

class Histogram {
 public:
  Histogram() = default;
  void Observe(double v) const;

 private:
  friend class Registry;
  explicit Histogram(prometheus::Histogram* h) : h_(h) {}
  prometheus::Histogram* h_ = nullptr;
};

// `count` upper bounds start, start*factor, start*factor^2, ... (+Inf is
// always added by the exposition).
std::vector<double> ExponentialBuckets(double start, double factor, int count);
// Latencies from 0.5 ms to about 16 s, doubling.
std::vector<double> LatencyBuckets();

class Registry {
 public:
  static constexpr size_t kDefaultMaxSeries = 1000;
  // The Content-Type of Text().
  static constexpr char kContentType[] = "text/plain; version=0.0.4; charset=utf-8";

  explicit Registry(size_t max_series = kDefaultMaxSeries);
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The series of family `name` with `labels`, created on first use (with
  // `help`, and for histograms `buckets`, from the first call). A name used
  // before with another type is a bug: the handle does nothing.
  Counter GetCounter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge GetGauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram GetHistogram(const std::string& name, const std::string& help, const std::vector<double>& buckets,
                         const Labels& labels = {});

  // Drops the gauge series of family `name` whose labels `keep` refuses
  // (per-task series once the task is gone); handles to them must not be
  // used afterwards.
  void RetainGauges(const std::string& name, const std::function<bool(const Labels&)>& keep);

  // Runs `fn` at the start of every Text(), on the scraping thread: for
  // gauges computed from state when asked.
  void OnCollect(std::function<void()> fn);

  // Every family in the text exposition format, version 0.0.4.
  std::string Text();

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Family;
  // The family `name` of `type` (created if new); nullptr if the name is
  // taken by another type or invalid. Counts and bounds its series.
  Family* FamilyFor(const std::string& name, const std::string& help, Type type)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `family` may hold `labels` (it has them, or has room).
  bool Admit(Family& family, const Labels& labels) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The handle of one series (Get* above); `args` make a new one.
  template <typename Handle, typename Metric, typename... Args>
  Handle Get(const std::string& name, const std::string& help, Type type, const Labels& labels,
             const Args&... args);

  const size_t max_series_;
  std::unique_ptr<prometheus::Registry> registry_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Family>> families_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> on_collect_ ABSL_GUARDED_BY(mu_);
  absl::Mutex collect_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // one Text() at a time
};

}  // namespace herd::metrics
