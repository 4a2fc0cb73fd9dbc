// Fluent builders for tests: JobBuilder("web").Tasks(3).Cpu(500).Build(),
// MachineBuilder("m1").Cpu(4000).Memory(8 << 30).Attr("rack", "r1").Build(),
// and mutation helpers. Test-only (herd_testing); header-only so the pure
// core's tests can use it without linking anything else.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "herd/v1/mutation.pb.h"
#include "herd/v1/objects.pb.h"

namespace herd::testing {

class JobBuilder {
 public:
  explicit JobBuilder(std::string name, std::string user = "alice") {
    spec_.set_name(std::move(name));
    spec_.set_user(std::move(user));
    spec_.set_priority(100);
    spec_.set_task_count(1);
    spec_.mutable_task()->add_command("/bin/true");
    spec_.mutable_task()->mutable_resources()->set_cpu_millis(100);
    spec_.mutable_task()->mutable_resources()->set_memory_bytes(64LL << 20);
    spec_.set_grace_period_ms(1000);
    spec_.mutable_restart()->set_mode(v1::RestartPolicy::ON_FAILURE);
  }
  JobBuilder& Priority(int32_t p) { spec_.set_priority(p); return *this; }
  JobBuilder& Tasks(int32_t n) { spec_.set_task_count(n); return *this; }
  JobBuilder& Cpu(int64_t millis) { spec_.mutable_task()->mutable_resources()->set_cpu_millis(millis); return *this; }
  JobBuilder& Memory(int64_t bytes) { spec_.mutable_task()->mutable_resources()->set_memory_bytes(bytes); return *this; }
  JobBuilder& Ports(int64_t n) { spec_.mutable_task()->mutable_resources()->set_ports(n); return *this; }
  JobBuilder& Extended(const std::string& k, int64_t v) {
    (*spec_.mutable_task()->mutable_resources()->mutable_extended())[k] = v;
    return *this;
  }
  JobBuilder& Command(std::vector<std::string> argv) {
    spec_.mutable_task()->clear_command();
    for (auto& a : argv) spec_.mutable_task()->add_command(a);
    return *this;
  }
  JobBuilder& Constraint(const std::string& attr, v1::Constraint::Op op, std::vector<std::string> values = {},
                         bool soft = false, int32_t weight = 0) {
    v1::Constraint* c = spec_.add_constraints();
    c->set_attribute(attr);
    c->set_op(op);
    for (auto& v : values) c->add_values(v);
    c->set_soft(soft);
    c->set_weight(weight);
    return *this;
  }
  JobBuilder& Restart(v1::RestartPolicy::Mode mode) { spec_.mutable_restart()->set_mode(mode); return *this; }
  JobBuilder& DifferentMachines(bool on = true) { spec_.set_different_machines(on); return *this; }
  JobBuilder& AtMostOnce(bool on = true) { spec_.set_at_most_once(on); return *this; }
  JobBuilder& Grace(int64_t ms) { spec_.set_grace_period_ms(ms); return *this; }
  // Waits for these jobs ("user/name") to finish (spec.after).
  JobBuilder& After(std::vector<std::string> jobs) {
    for (auto& j : jobs) spec_.add_after(j);
    return *this;
  }
  // A scheduled job (spec.schedule).
  JobBuilder& Schedule(const std::string& cron, v1::Concurrency c = v1::CONCURRENCY_UNSPECIFIED,
                       const std::string& zone = "") {
    spec_.set_schedule(cron);
    spec_.set_concurrency(c);
    spec_.set_time_zone(zone);
    return *this;
  }
  JobBuilder& MaxPerDomain(const std::string& attr, int32_t n) {
    (*spec_.mutable_max_per_domain())[attr] = n;
    return *this;
  }
  JobBuilder& Package(const std::string& name, const std::string& sha256) {
    v1::Package* p = spec_.mutable_task()->add_packages();
    p->set_name(name);
    p->set_sha256(sha256);
    return *this;
  }
  JobBuilder& Label(const std::string& k, const std::string& v) {
    (*spec_.mutable_labels())[k] = v;
    return *this;
  }
  JobBuilder& Env(const std::string& k, const std::string& v) {
    (*spec_.mutable_task()->mutable_env())[k] = v;
    return *this;
  }
  v1::JobSpec Build() const { return spec_; }
  std::string Id() const { return spec_.user() + "/" + spec_.name(); }

 private:
  v1::JobSpec spec_;
};

class MachineBuilder {
 public:
  explicit MachineBuilder(std::string name) {
    m_.set_name(std::move(name));
    m_.set_address("127.0.0.1:0");
    m_.mutable_capacity()->set_cpu_millis(4000);
    m_.mutable_capacity()->set_memory_bytes(8LL << 30);
    m_.mutable_capacity()->set_disk_bytes(100LL << 30);
    m_.mutable_capacity()->set_ports(1000);
  }
  MachineBuilder& Cpu(int64_t millis) { m_.mutable_capacity()->set_cpu_millis(millis); return *this; }
  MachineBuilder& Memory(int64_t bytes) { m_.mutable_capacity()->set_memory_bytes(bytes); return *this; }
  MachineBuilder& Ports(int64_t n) { m_.mutable_capacity()->set_ports(n); return *this; }
  MachineBuilder& Extended(const std::string& k, int64_t v) {
    (*m_.mutable_capacity()->mutable_extended())[k] = v;
    return *this;
  }
  MachineBuilder& Attr(const std::string& k, const std::string& v) {
    (*m_.mutable_attributes())[k] = v;
    return *this;
  }
  MachineBuilder& Address(const std::string& a) { m_.set_address(a); return *this; }
  MachineBuilder& Package(const std::string& sha256) { m_.add_packages(sha256); return *this; }
  v1::Machine Build() const { return m_; }

 private:
  v1::Machine m_;
};

inline v1::Mutation Submit(std::vector<v1::JobSpec> jobs, std::string request_id = "") {
  v1::Mutation m;
  m.set_time_ms(1000);
  for (auto& j : jobs) *m.mutable_jobs_submitted()->add_jobs() = j;
  m.mutable_jobs_submitted()->set_request_id(request_id);
  return m;
}
inline v1::Mutation Submit(const v1::JobSpec& job) { return Submit(std::vector<v1::JobSpec>{job}); }

// The batch controller's start of a run of a scheduled job (or, with
// `skipped`, the record of a run not started).
inline v1::Mutation Triggered(const std::string& job, int64_t due_ms, const std::string& skipped = "",
                              std::vector<std::string> replace = {}, int32_t missed = 0) {
  v1::Mutation m;
  m.set_time_ms(due_ms);
  v1::ScheduleTriggered* t = m.mutable_schedule_triggered();
  t->set_job(job);
  t->set_due_ms(due_ms);
  if (skipped.empty()) t->set_run(job + "-" + std::to_string(due_ms / 1000));
  t->set_skipped(skipped);
  for (auto& r : replace) t->add_replace(r);
  t->set_missed(missed);
  return m;
}

inline v1::Mutation Kill(const std::string& job, const std::string& reason = "") {
  v1::Mutation m;
  m.mutable_job_killed()->set_job(job);
  m.mutable_job_killed()->set_reason(reason);
  return m;
}

// A JobUpdated: `spec` replaces the job's; the listed tasks restart, move
// or are held back; the rest take it in place.
inline v1::Mutation Update(const v1::JobSpec& spec, std::vector<int32_t> restart = {},
                           std::vector<int32_t> reschedule = {}, std::vector<int32_t> hold = {},
                           int64_t expect_version = 0) {
  v1::Mutation m;
  m.set_time_ms(2000);
  auto* u = m.mutable_job_updated();
  *u->mutable_spec() = spec;
  u->set_expect_version(expect_version);
  for (int32_t i : restart) u->add_restart(i);
  for (int32_t i : reschedule) u->add_reschedule(i);
  for (int32_t i : hold) u->add_hold(i);
  return m;
}

inline v1::TaskRef Ref(const std::string& job, int32_t index, int64_t incarnation) {
  v1::TaskRef r;
  r.set_job(job);
  r.set_index(index);
  r.set_incarnation(incarnation);
  return r;
}

inline v1::Mutation Schedule(const std::string& job, int32_t index, const std::string& machine,
                             std::vector<v1::TaskRef> victims = {}, int64_t expect_state_revision = 0) {
  v1::Mutation m;
  auto* s = m.mutable_task_scheduled();
  s->set_job(job);
  s->set_index(index);
  s->set_machine(machine);
  s->set_expect_state_revision(expect_state_revision);
  for (auto& v : victims) *s->add_victims() = v;
  return m;
}

inline v1::Mutation Register(const v1::Machine& machine) {
  v1::Mutation m;
  *m.mutable_machine_registered()->mutable_machine() = machine;
  return m;
}

inline v1::Mutation Down(const std::string& name, const std::string& reason = "missed polls") {
  v1::Mutation m;
  m.mutable_machine_down()->set_name(name);
  m.mutable_machine_down()->set_reason(reason);
  return m;
}

inline v1::Mutation Interference(const std::string& name, const std::string& level,
                                 const std::string& reason = "run x waited for a CPU 40% of the time") {
  v1::Mutation m;
  m.mutable_machine_interference()->set_name(name);
  m.mutable_machine_interference()->set_level(level);
  m.mutable_machine_interference()->set_reason(reason);
  return m;
}

inline v1::Mutation Up(const std::string& name) {
  v1::Mutation m;
  m.mutable_machine_up()->set_name(name);
  return m;
}

inline v1::Mutation Observed(const v1::TaskRef& ref, v1::Task::Phase phase, int64_t pid = 0) {
  v1::Mutation m;
  *m.mutable_task_observed()->mutable_task() = ref;
  m.mutable_task_observed()->set_phase(phase);
  m.mutable_task_observed()->set_pid(pid);
  return m;
}

inline v1::Mutation Exited(const v1::TaskRef& ref, int32_t code, int32_t signal = 0) {
  v1::Mutation m;
  *m.mutable_task_exited()->mutable_task() = ref;
  m.mutable_task_exited()->set_exit_code(code);
  m.mutable_task_exited()->set_exit_signal(signal);
  return m;
}

inline v1::Mutation Lost(const v1::TaskRef& ref, const std::string& reason = "vanished") {
  v1::Mutation m;
  *m.mutable_task_lost()->mutable_task() = ref;
  m.mutable_task_lost()->set_reason(reason);
  return m;
}

inline v1::Mutation Rescheduled(const v1::TaskRef& ref, const std::string& reason, int64_t avoid_until_ms = 0) {
  v1::Mutation m;
  *m.mutable_task_rescheduled()->mutable_task() = ref;
  m.mutable_task_rescheduled()->set_reason(reason);
  m.mutable_task_rescheduled()->set_avoid_until_ms(avoid_until_ms);
  return m;
}

inline v1::Mutation Reserve(const std::string& job, int32_t index, int64_t cpu, int64_t mem) {
  v1::Mutation m;
  auto* e = m.mutable_reservations_set()->add_entries();
  e->set_job(job);
  e->set_index(index);
  e->mutable_reservation()->set_cpu_millis(cpu);
  e->mutable_reservation()->set_memory_bytes(mem);
  return m;
}

inline v1::Mutation SetQuota(const std::string& user, const std::string& band, int64_t cpu, int64_t mem) {
  v1::Mutation m;
  auto* q = m.mutable_quota_set()->mutable_quota();
  q->set_user(user);
  q->set_band(band);
  q->mutable_limit()->set_cpu_millis(cpu);
  q->mutable_limit()->set_memory_bytes(mem);
  return m;
}

}  // namespace herd::testing
