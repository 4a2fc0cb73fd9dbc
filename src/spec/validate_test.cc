// Validate() on protos built directly, as the master receives them over the
// API (no parser, no defaults).
#include <gtest/gtest.h>

#include "absl/strings/str_split.h"
#include "google/protobuf/text_format.h"
#include "spec/spec.h"
#include "spec/validate.h"

namespace herd::spec {
namespace {

v1::JobSpec ValidSpec() {
  v1::JobSpec s;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    name: "web" user: "alice" priority: 200 task_count: 4
    task {
      command: "/bin/web" command: "--port=${port.http}"
      env { key: "SHARD" value: "${task.index}" }
      resources { cpu_millis: 500 memory_bytes: 67108864 ports: 1 extended { key: "gpu" value: 1 } }
      port_names: "http"
    }
    constraints { attribute: "zone" op: IN values: "a" values: "b" }
    constraints { attribute: "ssd" op: EXISTS soft: true weight: 5 }
    overrides { indexes: 0 indexes: 3 cpu_millis: 1000 }
  )pb", &s));
  return s;
}

// The "path: message" lines of Validate's error.
std::vector<std::string> Problems(const v1::JobSpec& s) {
  absl::Status st = Validate(s);
  if (st.ok()) return {};
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  return absl::StrSplit(st.message(), '\n');
}

TEST(ValidateTest, AcceptsValidSpec) { EXPECT_TRUE(Validate(ValidSpec()).ok()) << Validate(ValidSpec()); }

TEST(ValidateTest, UnspecifiedEnumsMeanDefaults) {
  v1::JobSpec s = ValidSpec();
  s.clear_restart();
  s.set_appclass(v1::APPCLASS_UNSPECIFIED);
  s.set_grace_period_ms(0);
  EXPECT_TRUE(Validate(s).ok()) << Validate(s);
}

TEST(ValidateTest, EmptySpecListsEveryRequiredField) {
  EXPECT_EQ(Problems(v1::JobSpec()),
            (std::vector<std::string>{
                "name: missing: every job needs a name",
                "user: missing: say whose job this is with user:",
                "tasks: must be at least 1, got 0",
                "command: missing: every job needs a command, e.g. command: [\"/bin/server\", \"--port=8080\"]",
                "resources.cpu: missing: every task needs a CPU limit, e.g. cpu: 500m",
                "resources.memory: missing: every task needs a memory limit, e.g. memory: 64Mi",
            }));
}

struct Case {
  const char* name;
  void (*mutate)(v1::JobSpec*);
  const char* want;  // one whole line of the error
};

TEST(ValidateTest, ReportsEachProblem) {
  const Case cases[] = {
      {"bad name", [](v1::JobSpec* s) { s->set_name("Web"); },
       "name: job name 'Web' must start with a lowercase letter"},
      {"bad user", [](v1::JobSpec* s) { s->set_user("al ice"); },
       "user: user name 'al ice' has the character ' '; use a-z, 0-9, '-', '_' and '.'"},
      {"negative priority", [](v1::JobSpec* s) { s->set_priority(-1); }, "priority: must not be negative, got -1"},
      {"absurd priority", [](v1::JobSpec* s) { s->set_priority(451); },
       "priority: 451 is more than the limit of 450"},
      {"absurd tasks", [](v1::JobSpec* s) { s->set_task_count(100001); },
       "tasks: 100001 is more than the limit of 100000 tasks per job"},
      {"empty argv0", [](v1::JobSpec* s) { s->mutable_task()->set_command(0, ""); },
       "command[0]: must not be empty (it is the program to run)"},
      {"unknown variable", [](v1::JobSpec* s) { s->mutable_task()->add_args("${task.idx}"); },
       "args[0]: unknown variable ${task.idx} (known: ${task.index}, ${task.count}, ${job.name}, ${job.user}, "
       "${job.priority}, ${cell.name}, ${port.NAME}; write $${ for a literal ${)"},
      {"unknown port", [](v1::JobSpec* s) { s->mutable_task()->set_command(1, "${port.grpc}"); },
       "command[1]: ${port.grpc} names port 'grpc', which the job does not ask for (ports: [http])"},
      {"bad env name", [](v1::JobSpec* s) { (*s->mutable_task()->mutable_env())["MY-VAR"] = "1"; },
       "env.MY-VAR: 'MY-VAR' is not a valid environment variable name (use letters, digits and '_', not starting "
       "with a digit)"},
      {"absolute workdir", [](v1::JobSpec* s) { s->mutable_task()->set_workdir("/etc"); },
       "workdir: '/etc' must be relative to the task's sandbox"},
      {"escaping workdir", [](v1::JobSpec* s) { s->mutable_task()->set_workdir("a/../../b"); },
       "workdir: 'a/../../b' must not leave the task's sandbox ('..')"},
      {"negative cpu", [](v1::JobSpec* s) { s->mutable_task()->mutable_resources()->set_cpu_millis(-5); },
       "resources.cpu: must not be negative, got -5m"},
      {"absurd cpu", [](v1::JobSpec* s) { s->mutable_task()->mutable_resources()->set_cpu_millis(1'000'001); },
       "resources.cpu: 1000.001 cores is more than the limit of 1000 cores per task"},
      {"absurd memory",
       [](v1::JobSpec* s) { s->mutable_task()->mutable_resources()->set_memory_bytes(int64_t{65} << 40); },
       "resources.memory: 65Ti is more than the limit of 64Ti per task"},
      {"absurd disk", [](v1::JobSpec* s) { s->mutable_task()->mutable_resources()->set_disk_bytes(int64_t{2} << 50); },
       "resources.disk: 2Pi is more than the limit of 1Pi per task"},
      {"absurd ports", [](v1::JobSpec* s) { s->mutable_task()->mutable_resources()->set_ports(65); },
       "resources.ports: 65 ports is more than the limit of 64 per task"},
      {"ports vs names", [](v1::JobSpec* s) { s->mutable_task()->mutable_resources()->set_ports(2); },
       "resources.ports: asks for 2 ports but names 1"},
      {"bad port name", [](v1::JobSpec* s) {
         s->mutable_task()->set_port_names(0, "HTTP");
         s->mutable_task()->set_command(1, "${port.HTTP}");
       },
       "resources.ports[0]: 'HTTP' is not a valid port name (1-63 characters of a-z, 0-9, '-' and '_', starting "
       "with a letter)"},
      {"absurd extended",
       [](v1::JobSpec* s) { (*s->mutable_task()->mutable_resources()->mutable_extended())["gpu"] = 1'000'001; },
       "resources.extended.gpu: 1000001 is more than the limit of 1000000 per task"},
      {"extended shadows cpu",
       [](v1::JobSpec* s) { (*s->mutable_task()->mutable_resources()->mutable_extended())["cpu"] = 1; },
       "resources.extended.cpu: 'cpu' is not an extended resource; set resources.cpu instead"},
      {"constraint op", [](v1::JobSpec* s) { s->mutable_constraints(0)->set_op(v1::Constraint::OP_UNSPECIFIED); },
       "constraints[0].op: missing: use ==, !=, in, not in, exists, not exists, <, <=, > or >="},
      {"constraint values", [](v1::JobSpec* s) { s->mutable_constraints(0)->set_op(v1::Constraint::GE); },
       "constraints[0].values: '>=' needs exactly one value, got 2"},
      {"exists with values", [](v1::JobSpec* s) { s->mutable_constraints(1)->add_values("x"); },
       "constraints[1].values: 'exists' takes no values, got 1"},
      {"bad attribute", [](v1::JobSpec* s) { s->mutable_constraints(0)->set_attribute("a b"); },
       "constraints[0].attribute: attribute name 'a b' has the character ' '"},
      {"hard weight", [](v1::JobSpec* s) { s->mutable_constraints(0)->set_weight(3); },
       "constraints[0].weight: only soft constraints have a weight (add soft: true)"},
      {"max restarts", [](v1::JobSpec* s) { s->mutable_restart()->set_max_restarts(10'001); },
       "restart.max_restarts: 10001 is more than the limit of 10000 (0 means no limit)"},
      {"backoff order",
       [](v1::JobSpec* s) {
         s->mutable_restart()->set_backoff_initial_ms(5000);
         s->mutable_restart()->set_backoff_max_ms(1000);
       },
       "restart.max_backoff: 1s is less than backoff (5s)"},
      {"absurd grace", [](v1::JobSpec* s) { s->set_grace_period_ms(7'200'000); },
       "grace_period: 2h is more than the limit of 1h"},
      {"bad appclass", [](v1::JobSpec* s) { s->set_appclass(static_cast<v1::AppClass>(9)); },
       "appclass: unknown appclass number 9"},
      {"bad label", [](v1::JobSpec* s) { (*s->mutable_labels())["a b"] = "x"; },
       "labels.a b: 'a b' is not a valid label name (use letters, digits, '-', '_', '.' and '/')"},
      {"override out of range", [](v1::JobSpec* s) { s->mutable_overrides(0)->add_indexes(4); },
       "overrides[0].indexes: index 4 is out of range: the job has 4 tasks (0-3)"},
      {"override listed twice", [](v1::JobSpec* s) { s->mutable_overrides(0)->add_indexes(0); },
       "overrides[0].indexes: index 0 is listed twice"},
      {"override without index", [](v1::JobSpec* s) { s->mutable_overrides(0)->clear_indexes(); },
       "overrides[0].indexes: names no tasks: add index:, indexes: or range:"},
      {"override without change", [](v1::JobSpec* s) { s->mutable_overrides(0)->clear_cpu_millis(); },
       "overrides[0]: changes nothing: give command, args, env or resources"},
      {"override zero memory", [](v1::JobSpec* s) { s->mutable_overrides(0)->set_memory_bytes(0); },
       "overrides[0].resources.memory: must be more than 0"},
      {"override variable", [](v1::JobSpec* s) { (*s->mutable_overrides(0)->mutable_env())["X"] = "${nope}"; },
       "overrides[0].env.X: unknown variable ${nope} (known: ${task.index}, ${task.count}, ${job.name}, "
       "${job.user}, ${job.priority}, ${cell.name}, ${port.NAME}; write $${ for a literal ${)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    v1::JobSpec s = ValidSpec();
    c.mutate(&s);
    EXPECT_EQ(Problems(s), std::vector<std::string>{c.want});
  }
}

TEST(ValidateTest, ManyOutOfRangeIndexesAreSummarised) {
  v1::JobSpec s = ValidSpec();
  for (int i = 10; i < 30; ++i) s.mutable_overrides(0)->add_indexes(i);
  EXPECT_EQ(Problems(s), std::vector<std::string>{
                             "overrides[0].indexes: indexes 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, ... (20 in all) "
                             "are out of range: the job has 4 tasks (0-3)"});
}

// Issue #33, M6: counts inside one spec are bounded, each reported once.
TEST(ValidateTest, CountsInsideASpecAreBounded) {
  v1::JobSpec s = ValidSpec();  // has 2 constraints of its own
  for (int i = 0; i < 200; ++i) (*s.mutable_labels())[absl::StrCat("l", i)] = "v";
  for (int i = 0; i < 200; ++i) {
    v1::Constraint* c = s.add_constraints();
    c->set_attribute("rack");
    c->set_op(v1::Constraint::EQ);
    c->add_values("r1");
  }
  for (int i = 0; i < 40; ++i) {
    v1::Package* p = s.mutable_task()->add_packages();
    p->set_name(absl::StrCat("p", i));
    p->set_sha256(std::string(64, 'a'));
    p->set_url("https://example.com/p.tar");
  }
  EXPECT_EQ(Problems(s), (std::vector<std::string>{"packages: has 40 packages; at most 32",
                                                   "constraints: has 202 constraints; at most 128",
                                                   "labels: has 200 labels; at most 64"}));
}

}  // namespace
}  // namespace herd::spec
