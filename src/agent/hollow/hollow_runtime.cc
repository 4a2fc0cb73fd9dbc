#include "agent/hollow/hollow_runtime.h"

#include <algorithm>

namespace herd::agent {

// ---- HollowRuntime ----------------------------------------------------------

HollowRuntime::HollowRuntime(Options options, Clock* clock) : options_(options), clock_(clock) {}

HollowRuntime::~HollowRuntime() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void HollowRuntime::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void HollowRuntime::At(int64_t due_ms, HollowRunTable* table, std::string run_id, What what) {
  absl::MutexLock l(&mu_);
  events_.push(Event{due_ms, table, std::move(run_id), what});
}

void HollowRuntime::Forget(HollowRunTable* table) {
  absl::MutexLock l(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !busy_; };
  mu_.Await(absl::Condition(&idle));
  std::vector<Event> keep;
  while (!events_.empty()) {
    if (events_.top().table != table) keep.push_back(events_.top());
    events_.pop();
  }
  for (auto& e : keep) events_.push(std::move(e));
}

void HollowRuntime::RunDue() {
  std::vector<Event> batch;
  {
    absl::MutexLock l(&mu_);
    const int64_t now = clock_->MonotonicMs();
    while (!events_.empty() && events_.top().due_ms <= now) {
      batch.push_back(events_.top());
      events_.pop();
    }
    if (batch.empty()) return;
    busy_ = true;
  }
  // Tables are called without the runtime's lock: they call At() under
  // their own.
  for (const Event& e : batch) {
    if (e.what == What::kStart) {
      e.table->Started(e.run_id);
    } else {
      e.table->Exited(e.run_id);
    }
  }
  absl::MutexLock l(&mu_);
  busy_ = false;
}

void HollowRuntime::Loop() {
  while (true) {
    {
      absl::MutexLock l(&mu_);
      if (stop_) return;
      const int64_t now = clock_->MonotonicMs();
      const int64_t next = events_.empty() ? now + 50 : events_.top().due_ms;
      if (next > now) {
        // Wake for a new event sooner than the next one, or to stop.
        const size_t had = events_.size();
        auto changed = [this, had]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || events_.size() > had; };
        mu_.AwaitWithTimeout(absl::Condition(&changed), absl::Milliseconds(std::min<int64_t>(50, next - now)));
        if (stop_) return;
      }
    }
    RunDue();
  }
}

// ---- HollowRunTable ---------------------------------------------------------

HollowRunTable::HollowRunTable(HollowRuntime* runtime) : runtime_(runtime), started_ms_(runtime->clock()->NowMs()) {}

HollowRunTable::~HollowRunTable() { runtime_->Forget(this); }

void HollowRunTable::SetDesired(const std::vector<v1::TaskRun>& desired) {
  absl::MutexLock l(&mu_);
  std::map<std::string, v1::RunStatus> next;
  for (const v1::TaskRun& run : desired) {
    auto it = runs_.find(run.run_id());
    if (it != runs_.end()) {
      next.insert(runs_.extract(it));
      continue;
    }
    v1::RunStatus s;
    *s.mutable_ref() = run.ref();
    s.set_run_id(run.run_id());
    s.set_desired(true);
    s.set_phase(v1::Task::STARTING);
    next.emplace(run.run_id(), std::move(s));
    waiting_.push_back(run.run_id());
  }
  // What is left is no longer desired: gone at once (a hollow stop).
  runs_ = std::move(next);
  ++version_;
  StartMoreLocked();
}

void HollowRunTable::StartMoreLocked() {
  const HollowRuntime::Options& o = runtime_->options();
  const int64_t now = runtime_->clock()->MonotonicMs();
  while (!waiting_.empty() && starting_ < std::max(1, o.max_parallel_starts)) {
    std::string id = std::move(waiting_.front());
    waiting_.pop_front();
    if (!runs_.contains(id)) continue;  // stopped before its turn
    ++starting_;
    runtime_->At(now + o.start_ms, this, std::move(id), HollowRuntime::What::kStart);
  }
}

void HollowRunTable::Started(const std::string& run_id) {
  absl::MutexLock l(&mu_);
  --starting_;
  auto it = runs_.find(run_id);
  if (it != runs_.end() && it->second.phase() == v1::Task::STARTING) {
    v1::RunStatus& s = it->second;
    s.set_phase(v1::Task::ACTIVE);
    s.set_pid(++next_pid_);
    s.set_started_ms(runtime_->clock()->NowMs());
    ++starts_;
    ++version_;
    if (runtime_->options().run_ms > 0) {
      runtime_->At(runtime_->clock()->MonotonicMs() + runtime_->options().run_ms, this, run_id,
                   HollowRuntime::What::kExit);
    }
  }
  StartMoreLocked();
}

void HollowRunTable::Exited(const std::string& run_id) {
  absl::MutexLock l(&mu_);
  auto it = runs_.find(run_id);
  if (it == runs_.end() || it->second.phase() != v1::Task::ACTIVE) return;
  v1::RunStatus& s = it->second;
  s.set_phase(v1::Task::EXITED);
  s.set_terminal(true);
  s.set_exit_code(0);
  s.set_message("exited with code 0");
  ++version_;
}

std::vector<v1::RunStatus> HollowRunTable::Observe(uint64_t* version) const {
  absl::MutexLock l(&mu_);
  std::vector<v1::RunStatus> out;
  out.reserve(runs_.size());
  for (const auto& [id, s] : runs_) out.push_back(s);
  if (version != nullptr) *version = version_;
  return out;
}

uint64_t HollowRunTable::WaitForChange(uint64_t last_version, int64_t timeout_ms) const {
  absl::MutexLock l(&mu_);
  auto changed = [this, last_version]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return version_ != last_version; };
  mu_.AwaitWithTimeout(absl::Condition(&changed), absl::Milliseconds(std::max<int64_t>(0, timeout_ms)));
  return version_;
}

uint64_t HollowRunTable::Version() const {
  absl::MutexLock l(&mu_);
  return version_;
}

void HollowRunTable::DescribeMachine(v1::PollResponse* response) const { response->set_cgroup_version("none"); }

int64_t HollowRunTable::starts() const {
  absl::MutexLock l(&mu_);
  return starts_;
}

int64_t HollowRunTable::live() const {
  absl::MutexLock l(&mu_);
  int64_t n = 0;
  for (const auto& [id, s] : runs_) n += !s.terminal();
  return n;
}

}  // namespace herd::agent
