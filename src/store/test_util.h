// Test and benchmark helpers for the store: realistic mutations and a
// self-removing temporary directory. Not part of any library.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "herd/v1/mutation.pb.h"
#include "herd/v1/objects.pb.h"

namespace herd::store::testing {

// An agent report about a running task (the most common mutation), about
// 150 bytes serialized.
inline v1::Mutation TaskObservedMutation(int64_t revision) {
  v1::Mutation m;
  m.set_revision(revision);
  m.set_time_ms(1700000000000 + revision);
  m.set_actor(absl::StrCat("agent:machine-", revision % 12500, ".cell-a.example.com"));
  auto* o = m.mutable_task_observed();
  o->mutable_task()->set_job(absl::StrCat("user", revision % 97, "/web-frontend-", revision % 13));
  o->mutable_task()->set_index(static_cast<int32_t>(revision % 1000));
  o->mutable_task()->set_incarnation(revision % 7 + 1);
  o->set_phase(v1::Task::ACTIVE);
  o->set_pid(100000 + revision % 30000);
  o->set_restarts(static_cast<int32_t>(revision % 3));
  o->set_message(absl::StrCat("started /usr/bin/server --port=", 20000 + revision % 1000,
                              " in sandbox /var/lib/herd/tasks/", revision));
  o->set_started_ms(1700000000000 + revision);
  return m;
}

// A job submission, a few hundred bytes serialized.
inline v1::Mutation JobsSubmittedMutation(int64_t revision) {
  v1::Mutation m;
  m.set_revision(revision);
  m.set_time_ms(1700000000000 + revision);
  m.set_actor(absl::StrCat("user", revision % 97));
  auto* js = m.mutable_jobs_submitted();
  js->set_request_id(absl::StrCat("req-", revision, "-5f0c2a9e"));
  v1::JobSpec* job = js->add_jobs();
  job->set_name(absl::StrCat("batch-etl-", revision));
  job->set_user(absl::StrCat("user", revision % 97));
  job->set_priority(110);
  job->set_task_count(200);
  job->set_appclass(v1::BATCH);
  job->set_grace_period_ms(30000);
  job->set_source("jobs/etl/nightly.jsonnet");
  auto* t = job->mutable_task();
  t->add_command("/usr/bin/etl-worker");
  t->add_args("--input=/data/in/${task.index}");
  t->add_args("--output=/data/out/${task.index}");
  (*t->mutable_env())["LOG_LEVEL"] = "info";
  (*t->mutable_env())["REGION"] = "eu-west";
  t->mutable_resources()->set_cpu_millis(1500);
  t->mutable_resources()->set_memory_bytes(int64_t{4} << 30);
  t->mutable_resources()->set_disk_bytes(int64_t{20} << 30);
  auto* c = job->add_constraints();
  c->set_attribute("os");
  c->set_op(v1::Constraint::EQ);
  c->add_values("linux");
  job->mutable_restart()->set_mode(v1::RestartPolicy::ON_FAILURE);
  job->mutable_restart()->set_max_restarts(5);
  (*job->mutable_labels())["team"] = "data-platform";
  return m;
}

// The realistic mix: one submission for every nine agent reports.
inline v1::Mutation RealisticMutation(int64_t revision) {
  return revision % 10 == 0 ? JobsSubmittedMutation(revision) : TaskObservedMutation(revision);
}

inline v1::CellSnapshot Snapshot(int64_t revision, const std::string& cell = "test") {
  v1::CellSnapshot s;
  s.set_revision(revision);
  s.set_cell(cell);
  v1::Machine* m = s.add_machines();
  m->set_name(absl::StrCat("machine-", revision));
  return s;
}

// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TMPDIR");
    std::string tmpl = absl::StrCat(base != nullptr ? base : "/tmp", "/herd-store-XXXXXX");
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace herd::store::testing
