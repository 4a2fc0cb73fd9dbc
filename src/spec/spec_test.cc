#include "spec/spec.h"
#include "spec/jsonnet/evaluate.h"
#include "spec/limits.h"
#include "spec/validate.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cell/task_template.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"

namespace herd::spec {
namespace {

using ::testing::ElementsAre;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kTestdata = HERD_SPEC_TESTDATA;
const std::string kExamples = HERD_SPEC_EXAMPLES;

// The minimal spec of docs/specs.md (and examples/hello.yaml).
constexpr absl::string_view kHello = R"(name: hello
user: alice
priority: production        # a band name or a number
tasks: 3
command: ["/bin/sh", "-c", "echo task ${task.index}; sleep 3600"]
resources: {cpu: 100m, memory: 64Mi}
)";

v1::JobSpec Proto(absl::string_view text) {
  v1::JobSpec s;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(std::string(text), &s)) << text;
  return s;
}

void ExpectProto(const v1::JobSpec& got, const v1::JobSpec& want) {
  google::protobuf::util::MessageDifferencer diff;
  std::string report;
  diff.ReportDifferencesToString(&report);
  EXPECT_TRUE(diff.Compare(want, got)) << report << "\ngot:\n" << got.DebugString();
}

absl::StatusOr<std::vector<v1::JobSpec>> Yaml(absl::string_view text, const ParseOptions& opts = {}) {
  return ParseText(text, "job.yaml", Format::kAuto, opts);
}

v1::JobSpec One(absl::string_view text, absl::string_view source = "job.yaml") {
  auto specs = ParseText(text, source, Format::kAuto);
  EXPECT_TRUE(specs.ok()) << specs.status();
  if (!specs.ok() || specs->size() != 1) return {};
  return (*specs)[0];
}

// The error lines of a parse that must fail.
std::vector<std::string> Errors(absl::string_view text, absl::string_view source = "job.yaml") {
  auto specs = ParseText(text, source, Format::kAuto);
  EXPECT_FALSE(specs.ok()) << "parsed:\n" << text;
  if (specs.ok()) return {};
  EXPECT_EQ(specs.status().code(), absl::StatusCode::kInvalidArgument);
  return absl::StrSplit(specs.status().message(), '\n');
}

// --- The fixed public interface -------------------------------------------------------------

TEST(SpecTest, MinimalSpecParsesToExactProto) {
  ExpectProto(One(kHello, "examples/hello.yaml"), Proto(R"pb(
    name: "hello" user: "alice" priority: 200 task_count: 3
    task {
      command: "/bin/sh" command: "-c" command: "echo task ${task.index}; sleep 3600"
      resources { cpu_millis: 100 memory_bytes: 67108864 }
    }
    restart { mode: ON_FAILURE backoff_initial_ms: 1000 backoff_max_ms: 60000 }
    grace_period_ms: 10000
    appclass: LATENCY_SENSITIVE
    source: "examples/hello.yaml"
  )pb"));
}

TEST(SpecTest, ExamplesHelloIsTheMinimalSpec) {
  std::ifstream in(kExamples + "/hello.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, kHello);
  auto specs = ParseFile(kExamples + "/hello.yaml");
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 1u);
  EXPECT_EQ((*specs)[0].source(), kExamples + "/hello.yaml");
}

TEST(SpecTest, AllExamplesParse) {
  ParseOptions opts;
  opts.default_user = "alice";  // as herd submit fills it in
  for (const char* name : {"hello.yaml", "web.yaml", "batch.jsonnet", "pipeline.yaml", "logsaver.yaml"}) {
    SCOPED_TRACE(name);
    auto specs = ParseFile(kExamples + "/" + name, opts);
    ASSERT_TRUE(specs.ok()) << specs.status();
    EXPECT_FALSE(specs->empty());
  }
}

// Allocs (issue #14 item 3): an alloc set reserves and runs nothing; a job
// names the alloc set it runs in, by name or user/name.
TEST(SpecTest, AllocSetsAndJobsInThem) {
  v1::JobSpec set = One("name: slots\nuser: alice\nalloc_set: true\ntasks: 2\nresources: {cpu: 1, memory: 1Gi}\n");
  EXPECT_TRUE(set.alloc_set());
  EXPECT_TRUE(set.task().command().empty());
  EXPECT_EQ(One("name: web\nuser: alice\nalloc: slots\ncommand: x\nresources: {cpu: 1, memory: 1Mi}\n").alloc(),
            "alice/slots");
  EXPECT_EQ(One("name: web\nuser: alice\nalloc: bob/slots\ncommand: x\nresources: {cpu: 1, memory: 1Mi}\n").alloc(),
            "bob/slots");
  EXPECT_THAT(Errors("name: slots\nuser: alice\nalloc_set: true\ncommand: [sleep, '1']\nresources: {cpu: 1, memory: 1Gi}\n"),
              ElementsAre(HasSubstr("job.yaml:4:10: command: an alloc set runs nothing of its own")));
  EXPECT_THAT(Errors("name: web\nuser: alice\nalloc: 'no such/x/y'\ncommand: x\nresources: {cpu: 1, memory: 1Mi}\n"),
              ElementsAre(HasSubstr("alloc: 'no such/x/y' is not a job name")));
  EXPECT_THAT(Errors("name: slots\nuser: alice\nalloc_set: yes please\nresources: {cpu: 1, memory: 1Gi}\n"),
              Contains(HasSubstr("job.yaml:3:12: alloc_set: expected true or false, got 'yes please'")));
}

TEST(SpecTest, Defaults) {
  v1::JobSpec s = One("name: d\nuser: u\ncommand: run\nresources: {cpu: 1, memory: 1Gi}\n");
  ExpectProto(s, Proto(R"pb(
    name: "d" user: "u" priority: 100 task_count: 1
    task {
      command: "/bin/sh" command: "-c" command: "run"
      resources { cpu_millis: 1000 memory_bytes: 1073741824 }
    }
    restart { mode: ON_FAILURE backoff_initial_ms: 1000 backoff_max_ms: 60000 }
    grace_period_ms: 10000
    appclass: BATCH
    source: "job.yaml"
  )pb"));
}

TEST(SpecTest, DefaultUserFillsMissingUserOnly) {
  constexpr absl::string_view kNoUser = "name: d\ncommand: run\nresources: {cpu: 1, memory: 1Gi}\n";
  auto specs = Yaml(kNoUser, {.default_user = "carol"});
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_EQ((*specs)[0].user(), "carol");
  specs = Yaml(absl::StrCat(kNoUser, "user: dave\n"), {.default_user = "carol"});
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_EQ((*specs)[0].user(), "dave");
  EXPECT_THAT(Errors(kNoUser), ElementsAre("job.yaml:1:1: user: missing: say whose job this is with user:"));
}

TEST(SpecTest, EveryFieldParses) {
  v1::JobSpec s = One(R"(
name: web
user: alice
priority: 250
tasks: 4
command: [/bin/web, "--port=${port.http}"]
args: [--verbose]
env: {SHARD: "${task.index}", DEBUG: true, N: 3}
workdir: app
resources:
  cpu: 0.5
  memory: 536870912
  disk: 10Gi
  ports: [http, admin]
  gpu: 1
  extended: {fpga: 2}
constraints:
  - arch == amd64
  - {attribute: zone, op: in, values: [a, b]}
  - {attribute: kernel, op: ">=", value: "5.10"}
  - {attribute: ssd, op: exists, soft: true, weight: 3}
soft_constraints:
  - rack != r1
  - {attribute: cores, op: ">", value: 4, weight: 2}
restart: {policy: always, max_restarts: 5, backoff: 500ms, max_backoff: 30s}
grace_period: 1m30s
appclass: batch
labels: {team: search, tier: "1"}
overrides:
  - {index: 0, command: [/bin/web, --leader], env: {ROLE: leader}}
  - {indexes: [1, 2], args: [--quiet], resources: {cpu: 250m, memory: 1Gi, disk: 1Gi, gpu: 0}}
  - {range: 2-3, resources: {extended: {fpga: 1}}}
)");
  ExpectProto(s, Proto(R"pb(
    name: "web" user: "alice" priority: 250 task_count: 4
    task {
      command: "/bin/web" command: "--port=${port.http}"
      args: "--verbose"
      env { key: "SHARD" value: "${task.index}" }
      env { key: "DEBUG" value: "true" }
      env { key: "N" value: "3" }
      workdir: "app"
      resources {
        cpu_millis: 500 memory_bytes: 536870912 disk_bytes: 10737418240 ports: 2
        extended { key: "gpu" value: 1 }
        extended { key: "fpga" value: 2 }
      }
      port_names: "http" port_names: "admin"
    }
    constraints { attribute: "arch" op: EQ values: "amd64" }
    constraints { attribute: "zone" op: IN values: "a" values: "b" }
    constraints { attribute: "kernel" op: GE values: "5.10" }
    constraints { attribute: "ssd" op: EXISTS soft: true weight: 3 }
    constraints { attribute: "rack" op: NE values: "r1" soft: true weight: 1 }
    constraints { attribute: "cores" op: GT values: "4" soft: true weight: 2 }
    restart { mode: ALWAYS max_restarts: 5 backoff_initial_ms: 500 backoff_max_ms: 30000 }
    grace_period_ms: 90000
    appclass: BATCH
    labels { key: "team" value: "search" }
    labels { key: "tier" value: "1" }
    overrides { indexes: 0 command: "/bin/web" command: "--leader" env { key: "ROLE" value: "leader" } }
    overrides {
      indexes: 1 indexes: 2 args: "--quiet"
      cpu_millis: 250 memory_bytes: 1073741824 disk_bytes: 1073741824 extended { key: "gpu" value: 0 }
    }
    overrides { indexes: 2 indexes: 3 extended { key: "fpga" value: 1 } }
    source: "job.yaml"
  )pb"));
}

TEST(SpecTest, PriorityBandsAndAppclassDefault) {
  const struct {
    const char* priority;
    int32_t want;
    v1::AppClass appclass;
  } cases[] = {
      {"free", 0, v1::BATCH},       {"batch", 100, v1::BATCH},
      {"best-effort", 100, v1::BATCH}, {"mid", 116, v1::BATCH},
      {"production", 200, v1::LATENCY_SENSITIVE}, {"prod", 200, v1::LATENCY_SENSITIVE},
      {"monitoring", 360, v1::LATENCY_SENSITIVE}, {"Production", 200, v1::LATENCY_SENSITIVE},
      {"119", 119, v1::BATCH},      {"120", 120, v1::LATENCY_SENSITIVE},
      {"0", 0, v1::BATCH},          {"450", 450, v1::LATENCY_SENSITIVE},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.priority);
    v1::JobSpec s = One(absl::StrCat("name: p\nuser: u\ncommand: x\nresources: {cpu: 1, memory: 1Mi}\npriority: ",
                                     c.priority, "\n"));
    EXPECT_EQ(s.priority(), c.want);
    EXPECT_EQ(s.appclass(), c.appclass);
  }
  EXPECT_EQ(One("name: p\nuser: u\ncommand: x\nresources: {cpu: 1, memory: 1Mi}\npriority: prod\nappclass: batch\n")
                .appclass(),
            v1::BATCH);
  EXPECT_EQ(One("name: p\nuser: u\ncommand: x\nresources: {cpu: 1, memory: 1Mi}\nappclass: latency-sensitive\n")
                .appclass(),
            v1::LATENCY_SENSITIVE);
}

TEST(SpecTest, QuantityForms) {
  const struct {
    const char* resources;
    int64_t cpu, memory;
  } cases[] = {
      {"{cpu: 500m, memory: 64Mi}", 500, 64 << 20},
      {"{cpu: \"0.5\", memory: 1Gi}", 500, 1 << 30},
      {"{cpu: 0.25, memory: 1000}", 250, 1000},
      {"{cpu: 2, memory: 1.5Gi}", 2000, 1536 << 20},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.resources);
    v1::JobSpec s = One(absl::StrCat("name: q\nuser: u\ncommand: x\nresources: ", c.resources, "\n"));
    EXPECT_EQ(s.task().resources().cpu_millis(), c.cpu);
    EXPECT_EQ(s.task().resources().memory_bytes(), c.memory);
  }
  v1::JobSpec s = One("name: q\nuser: u\ncommand: x\nresources: {cpu: 1, memory: 1Mi, ports: 3}\ngrace_period: 5\n");
  EXPECT_EQ(s.task().resources().ports(), 3);
  EXPECT_TRUE(s.task().port_names().empty());
  EXPECT_EQ(s.grace_period_ms(), 5000);
  s = One("name: q\nuser: u\ncommand: x\nresources: {cpu: 1, memory: 1Mi}\nrestart: never\n");
  EXPECT_EQ(s.restart().mode(), v1::RestartPolicy::NEVER);
  EXPECT_EQ(s.restart().backoff_initial_ms(), 1000);
}

// --- Errors: one table, every class, each with file:line:col and field ----------------------

constexpr absl::string_view kJob = "name: hello\nuser: alice\ncommand: [/bin/x]\nresources: {cpu: 1, memory: 1Gi}\n";

struct ErrorCase {
  const char* name;
  std::string text;
  std::vector<std::string> want;  // the whole error, line by line
};

TEST(SpecTest, ErrorsPointAtFileLineAndField) {
  const ErrorCase cases[] = {
      {"unknown field with suggestion", absl::StrCat(kJob, "comand: [/bin/y]\n"),
       {"job.yaml:5:1: unknown field 'comand' (did you mean 'command'?)"}},
      {"unknown field without suggestion", absl::StrCat(kJob, "flavour: x\n"),
       {"job.yaml:5:1: unknown field 'flavour'"}},
      {"unknown nested field", "name: h\nuser: u\ncommand: x\nresources:\n  cpu: 1\n  memroy: 1Gi\n",
       {"job.yaml:4:1: resources.memory: missing: every task needs a memory limit, e.g. memory: 64Mi",
        "job.yaml:6:3: resources: unknown field 'memroy' (did you mean 'memory'?)"}},
      {"bad unit", "name: h\nuser: u\ncommand: x\nresources:\n  cpu: 1\n  memory: 64Mb\n",
       {"job.yaml:6:11: resources.memory: unknown unit 'Mb' in '64Mb' (use Ki, Mi, Gi, Ti or k, M, G, T)"}},
      {"bad cpu unit", "name: h\nuser: u\ncommand: x\nresources: {cpu: 2cores, memory: 1Gi}\n",
       {"job.yaml:4:18: resources.cpu: unknown CPU unit 'cores' in '2cores' (use cores like 0.5 or millicores "
        "like 500m)"}},
      {"negative tasks", absl::StrCat(kJob, "tasks: -2\n"), {"job.yaml:5:8: tasks: must not be negative, got -2"}},
      {"negative cpu", "name: h\nuser: u\ncommand: x\nresources: {cpu: -1, memory: 1Gi}\n",
       {"job.yaml:4:18: resources.cpu: CPU quantity must not be negative, got '-1'"}},
      {"absurd memory", "name: h\nuser: u\ncommand: x\nresources: {cpu: 1, memory: 100Ti}\n",
       {"job.yaml:4:29: resources.memory: 100Ti is more than the limit of 64Ti per task"}},
      {"absurd cpu", "name: h\nuser: u\ncommand: x\nresources: {cpu: 5000, memory: 1Gi}\n",
       {"job.yaml:4:18: resources.cpu: 5000 cores is more than the limit of 1000 cores per task"}},
      {"absurd tasks", absl::StrCat(kJob, "tasks: 200000\n"),
       {"job.yaml:5:8: tasks: 200000 is more than the limit of 100000"}},
      {"absurd priority", absl::StrCat(kJob, "priority: 451\n"),
       {"job.yaml:5:11: priority: 451 is more than the limit of 450"}},
      {"absurd grace", absl::StrCat(kJob, "grace_period: 2h\n"),
       {"job.yaml:5:15: grace_period: 2h is more than the limit of 1h"}},
      {"absurd restarts", absl::StrCat(kJob, "restart: {policy: always, max_restarts: 20000}\n"),
       {"job.yaml:5:41: restart.max_restarts: 20000 is more than the limit of 10000"}},
      {"absurd ports", "name: h\nuser: u\ncommand: x\nresources: {cpu: 1, memory: 1Gi, ports: 100}\n",
       {"job.yaml:4:41: resources.ports: 100 ports is more than the limit of 64 per task"}},
      {"absurd gpu", "name: h\nuser: u\ncommand: x\nresources: {cpu: 1, memory: 1Gi, gpu: 2000000}\n",
       {"job.yaml:4:39: resources.gpu: 2000000 is more than the limit of 1000000 per task"}},
      {"bad name", "name: Hello\nuser: alice\ncommand: x\nresources: {cpu: 1, memory: 1Gi}\n",
       {"job.yaml:1:7: name: job name 'Hello' must start with a lowercase letter"}},
      {"bad constraint op", absl::StrCat(kJob, "constraints:\n  - arch = amd64\n"),
       {"job.yaml:6:5: constraints[0]: unknown operator '=' in 'arch = amd64' (use ==)"}},
      {"bad constraint map op", absl::StrCat(kJob, "constraints:\n  - {attribute: arch, op: '~=', value: x}\n"),
       {"job.yaml:6:27: constraints[0].op: unknown operator '~='; use ==, !=, in, not in, exists, not exists, <, "
        "<=, > or >="}},
      {"constraint value count", absl::StrCat(kJob, "constraints:\n  - {attribute: a, op: '<', values: [1, 2]}\n"),
       {"job.yaml:6:37: constraints[0].values: '<' needs exactly one value, got 2"}},
      {"soft constraint position", absl::StrCat(kJob, "constraints: [a == b]\nsoft_constraints: [c == d, 'e in']\n"),
       {"job.yaml:6:28: soft_constraints[1]: 'in' needs at least one value, e.g. [a, b] in 'e in'"}},
      {"wrong type", absl::StrCat(kJob, "tasks: three\n"), {"job.yaml:5:8: tasks: expected an integer, got 'three'"}},
      {"wrong type for list", "name: h\nuser: u\ncommand: {a: b}\nresources: {cpu: 1, memory: 1Gi}\n",
       {"job.yaml:3:10: command: expected a list of strings or a shell command line, got a map"}},
      {"unquoted colon in list", "name: h\nuser: u\ncommand: [sh, -c, echo a: b]\nresources: {cpu: 1, memory: 1Gi}\n",
       {"job.yaml:3:19: command[2]: expected a string, got a map (quote text that contains ': ')"}},
      {"duplicate key", "name: a\nuser: u\nname: b\ncommand: x\nresources: {cpu: 1, memory: 1Gi}\n",
       {"job.yaml:3:1: name: duplicate key 'name' (first at line 1)"}},
      {"unknown variable", "name: h\nuser: u\ncommand: 'echo ${task.idx}'\nresources: {cpu: 1, memory: 1Gi}\n",
       {"job.yaml:3:10: command: unknown variable ${task.idx} (known: ${task.index}, ${task.count}, ${job.name}, "
        "${job.user}, ${job.priority}, ${cell.name}, ${port.NAME}; write $${ for a literal ${)"}},
      {"unknown port variable", "name: h\nuser: u\ncommand: [/bin/x, '${port.http}']\nresources: {cpu: 1, memory: 1Gi}\n",
       {"job.yaml:3:19: command[1]: ${port.http} names port 'http', which the job does not ask for (ports: [])"}},
      {"override index out of range", absl::StrCat(kJob, "tasks: 3\noverrides:\n  - {index: 5, args: [x]}\n"),
       {"job.yaml:7:13: overrides[0].index: index 5 is out of range: the job has 3 tasks (0-2)"}},
      {"override range out of range", absl::StrCat(kJob, "tasks: 3\noverrides:\n  - range: 1-4\n    args: [x]\n"),
       {"job.yaml:7:12: overrides[0].range: indexes 3, 4 are out of range: the job has 3 tasks (0-2)"}},
      {"override keyed out of range", absl::StrCat(kJob, "overrides:\n  \"7\": {args: [x]}\n"),
       {"job.yaml:6:3: overrides[7]: index 7 is out of range: the job has 1 task (0-0)"}},
      {"override without index", absl::StrCat(kJob, "overrides:\n  - {args: [x]}\n"),
       {"job.yaml:6:5: overrides[0].indexes: names no tasks: add index:, indexes: or range:"}},
      {"override without change", absl::StrCat(kJob, "overrides:\n  - {index: 0}\n"),
       {"job.yaml:6:5: overrides[0]: changes nothing: give command, args, env or resources"}},
      {"override two index forms", absl::StrCat(kJob, "overrides:\n  - {index: 0, range: 0-0, args: [x]}\n"),
       {"job.yaml:6:23: overrides[0].range: give only one of index, indexes and range (index is already given)"}},
      {"bad range", absl::StrCat(kJob, "tasks: 5\noverrides:\n  - {range: 4-2, args: [x]}\n"),
       {"job.yaml:7:13: overrides[0].range: bad task indexes '4-2': the range 4-2 is backwards (write 3, 0-4 or "
        "1,3,5-7)"}},
      {"missing command", "name: h\nuser: u\nresources: {cpu: 1, memory: 1Gi}\n",
       {"job.yaml:1:1: command: missing: every job needs a command, e.g. command: [\"/bin/server\", "
        "\"--port=8080\"]"}},
      {"missing cpu", "name: h\nuser: u\ncommand: x\nresources: {memory: 1Gi}\n",
       {"job.yaml:4:12: resources.cpu: missing: every task needs a CPU limit, e.g. cpu: 500m"}},
      {"missing memory", "name: h\nuser: u\ncommand: x\nresources:\n  cpu: 1\n",
       {"job.yaml:4:1: resources.memory: missing: every task needs a memory limit, e.g. memory: 64Mi"}},
      {"missing resources", "name: h\nuser: u\ncommand: x\n",
       {"job.yaml:1:1: resources.cpu: missing: every task needs a CPU limit, e.g. cpu: 500m",
        "job.yaml:1:1: resources.memory: missing: every task needs a memory limit, e.g. memory: 64Mi"}},
      {"missing name", "user: u\ncommand: x\nresources: {cpu: 1, memory: 1Gi}\n",
       {"job.yaml:1:1: name: missing: every job needs a name"}},
      {"bad band", absl::StrCat(kJob, "priority: prodution\n"),
       {"job.yaml:5:11: priority: unknown priority band 'prodution' (did you mean 'production'?); use a number "
        "0-450 or free, batch, best-effort, mid, production, prod, monitoring"}},
      {"bad restart policy", absl::StrCat(kJob, "restart: alwys\n"),
       {"job.yaml:5:10: restart: unknown restart policy 'alwys' (did you mean 'always'?); use always, on-failure "
        "or never"}},
      {"bad env name", absl::StrCat(kJob, "env:\n  MY-VAR: 1\n"),
       {"job.yaml:6:11: env.MY-VAR: 'MY-VAR' is not a valid environment variable name (use letters, digits and "
        "'_', not starting with a digit)"}},
      {"env value missing", absl::StrCat(kJob, "env:\n  A:\n"),
       {"job.yaml:6:3: env.A: expected a value, got nothing (write A: \"\" for an empty one)"}},
      {"bad bool", absl::StrCat(kJob, "soft_constraints:\n  - {attribute: a, op: exists, soft: maybe}\n"),
       {"job.yaml:6:38: soft_constraints[0].soft: expected true or false, got 'maybe'"}},
      {"zero weight", absl::StrCat(kJob, "soft_constraints:\n  - {attribute: a, op: exists, weight: 0}\n"),
       {"job.yaml:6:40: soft_constraints[0].weight: must be at least 1"}},
      {"gpu twice", "name: h\nuser: u\ncommand: x\nresources: {cpu: 1, memory: 1Gi, gpu: 1, extended: {gpu: 2}}\n",
       {"job.yaml:4:39: resources.gpu: gpu is given twice (as gpu: and in extended:)"}},
      {"not a job", "- just a string\n", {"job.yaml:1:3: jobs[0]: expected a job (a map with name:, command:, "
                                          "resources: ...), got 'just a string'"}},
      {"jobs not a list", "jobs: {name: x}\n", {"job.yaml:1:7: jobs: expected a list of jobs, got a map"}},
      {"yaml syntax", "name: [a\nuser: u\n", {"job.yaml:2:5: YAML syntax error: end of sequence flow not found"}},
      {"unquoted variable in flow list", "name: w\ncommand: [/bin/web, --port=${port.http}]\n",
       {"job.yaml:2:29: YAML syntax error: end of sequence flow not found (inside [...], quote items that contain "
        "${...}, e.g. \"--port=${port.http}\")"}},
      {"empty file", "", {"no jobs in job.yaml"}},
      {"only comments", "# nothing\n---\n", {"no jobs in job.yaml"}},
      {"duplicate job", absl::StrCat("- ", absl::StrReplaceAll(kJob, {{"\n", "\n  "}}), "\n- ",
                                     absl::StrReplaceAll(kJob, {{"\n", "\n  "}})),
       {"job.yaml:6:9: jobs[1].name: job 'alice/hello' is defined twice in this file (first as jobs[0], line 1)"}},
  };
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.name, ":\n", c.text));
    EXPECT_EQ(Errors(c.text), c.want);
  }
}

TEST(SpecTest, ListsEveryProblemInLineOrder) {
  EXPECT_THAT(Errors(R"(name: Bad
user: alice
tasks: three
comand: x
resources: {cpu: 1, memory: 64Mb}
constraints: [zone ~ a]
)"),
              ElementsAre(
                  // Reported at the job, since there is no command to point at.
                  HasSubstr("job.yaml:1:1: command: missing"),
                  "job.yaml:1:7: name: job name 'Bad' must start with a lowercase letter",
                  "job.yaml:3:8: tasks: expected an integer, got 'three'",
                  "job.yaml:4:1: unknown field 'comand' (did you mean 'command'?)",
                  HasSubstr("job.yaml:5:29: resources.memory: unknown unit 'Mb'"),
                  "job.yaml:6:15: constraints[0]: unknown operator '~' in 'zone ~ a' (use ==, !=, in, not in, "
                  "exists, not exists, <, <=, >, >=)"));
}

// --- One or many jobs per file --------------------------------------------------------------

constexpr absl::string_view kTwoJobs[] = {"name: a\nuser: u\ncommand: x\nresources: {cpu: 1, memory: 1Gi}\n",
                                          "name: b\nuser: u\ncommand: y\nresources: {cpu: 2, memory: 2Gi}\n"};

std::string Indent(absl::string_view s) {
  return absl::StrCat("  ", absl::StrReplaceAll(absl::StripSuffix(s, "\n"), {{"\n", "\n  "}}), "\n");
}

TEST(SpecTest, YamlMultiDocumentListAndJobsForms) {
  const struct {
    const char* name;
    std::string text;
  } forms[] = {
      {"documents", absl::StrCat("---\n", kTwoJobs[0], "---\n", kTwoJobs[1], "...\n")},
      {"list", absl::StrCat("-", Indent(kTwoJobs[0]).substr(1), "-", Indent(kTwoJobs[1]).substr(1))},
      {"jobs", absl::StrCat("jobs:\n-", Indent(kTwoJobs[0]).substr(1), "-", Indent(kTwoJobs[1]).substr(1))},
      {"documents of lists", absl::StrCat("- ", Indent(kTwoJobs[0]).substr(2), "---\njobs:\n  - ",
                                          Indent(Indent(kTwoJobs[1])).substr(4))},
  };
  for (const auto& f : forms) {
    SCOPED_TRACE(absl::StrCat(f.name, ":\n", f.text));
    auto specs = Yaml(f.text);
    ASSERT_TRUE(specs.ok()) << specs.status();
    ASSERT_EQ(specs->size(), 2u);
    EXPECT_EQ((*specs)[0].name(), "a");
    EXPECT_EQ((*specs)[1].name(), "b");
    EXPECT_EQ((*specs)[1].task().resources().memory_bytes(), int64_t{2} << 30);
  }
}

TEST(SpecTest, ErrorsInLaterDocumentsHaveFileLines) {
  std::string text = absl::StrCat(kTwoJobs[0], "---\nname: c\nuser: u\ncommand: x\nresources: {cpu: 1, memory: 1Gb}\n");
  EXPECT_THAT(Errors(text), ElementsAre(HasSubstr("job.yaml:9:29: jobs[1].resources.memory: unknown unit 'Gb'")));
}

TEST(SpecTest, YamlMergeKeys) {
  auto specs = Yaml(R"(
jobs:
  - &base
    name: a
    user: u
    command: x
    resources: {cpu: 1, memory: 1Gi}
  - <<: *base
    name: b
)");
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 2u);
  EXPECT_EQ((*specs)[1].name(), "b");
  EXPECT_EQ((*specs)[1].task().resources().cpu_millis(), 1000);
}

TEST(SpecTest, JsonForms) {
  constexpr absl::string_view kA =
      R"({"name": "a", "user": "u", "tasks": 2, "command": ["/bin/a"], "resources": {"cpu": 0.5, "memory": "64Mi"}})";
  constexpr absl::string_view kB =
      R"({"name": "b", "user": "u", "command": "run b", "resources": {"cpu": "250m", "memory": 1048576}})";
  const std::string forms[] = {
      absl::StrCat("[", kA, ",\n", kB, "]"),
      absl::StrCat("{\n\t\"jobs\": [\n\t\t", kA, ",\n\t\t", kB, "\n\t]\n}\n"),
  };
  for (const std::string& text : forms) {
    SCOPED_TRACE(text);
    auto specs = ParseText(text, "jobs.json", Format::kAuto);
    ASSERT_TRUE(specs.ok()) << specs.status();
    ASSERT_EQ(specs->size(), 2u);
    EXPECT_EQ((*specs)[0].task_count(), 2);
    EXPECT_EQ((*specs)[0].task().resources().cpu_millis(), 500);
    EXPECT_EQ((*specs)[1].task().resources().memory_bytes(), 1 << 20);
    EXPECT_THAT((*specs)[1].task().command(), ElementsAre("/bin/sh", "-c", "run b"));
  }
  v1::JobSpec one = One(kA, "a.json");
  EXPECT_EQ(one.name(), "a");
  EXPECT_EQ(one.source(), "a.json");
}

TEST(SpecTest, JsonIsStrictAndInputsAreBounded) {
  const std::string ok = "{\"name\": \"a\", \"user\": \"u\", \"command\": [\"x\"], \"resources\": {\"cpu\": 1, "
                         "\"memory\": \"1Gi\"}}";
  EXPECT_TRUE(ParseText(ok, "a.json", Format::kAuto).ok());
  std::string trailing = ok;
  trailing.insert(trailing.size() - 2, ",");
  EXPECT_THAT(Errors(trailing, "a.json"), ElementsAre("a.json:1:86: not valid JSON (a trailing comma, a comment or single quotes?)"));
  // A 100 MB env value, a huge argv, a huge file: refused, and the message
  // stays short.
  std::string big_env = absl::StrCat("name: a\nuser: u\ncommand: [x]\nresources: {cpu: 1, memory: 1Gi}\nenv: {X: \"",
                                     std::string(100'000, 'v'), "\"}\n");
  std::vector<std::string> errs = Errors(big_env);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_THAT(errs[0], HasSubstr("env.X: is 100000 bytes long; at most 32768"));
  EXPECT_LT(errs[0].size(), 200u);
  std::string file(kMaxSpecFileBytes + 1, '#');
  EXPECT_THAT(Errors(file), ElementsAre(HasSubstr("a spec file may hold at most")));
}

TEST(SpecTest, DeepNestingIsRefusedSayingWhere) {
  std::string deep = absl::StrCat("name: ", std::string(100'000, '['), std::string(100'000, ']'), "\n");
  EXPECT_THAT(Errors(deep), ElementsAre("job.yaml:1:71: nested more than 64 levels deep"));
  // Brackets in strings and comments do not count.
  std::string quoted = absl::StrCat("name: a\nuser: u\ncommand: [\"", std::string(100, '['), "\"]  # ",
                                    std::string(100, '{'), "\nresources: {cpu: 1, memory: 1Gi}\n");
  EXPECT_TRUE(Yaml(quoted).ok()) << Yaml(quoted).status();
  std::string indented;
  for (int i = 0; i < 300; ++i) absl::StrAppend(&indented, std::string(i, ' '), "k", i, ":\n");
  EXPECT_THAT(Errors(indented), ElementsAre(HasSubstr("indented more than 256 columns")));
}

// yaml-cpp 0.7 loops forever, allocating, on a ',' where a document should
// start (found by fuzz/spec_yaml); the reader refuses it saying where.
TEST(SpecTest, AStrayCommaIsAnErrorNotAHang) {
  EXPECT_THAT(Errors(",\n"), ElementsAre(HasSubstr("job.yaml:1:1: YAML syntax error: unexpected ','")));
  EXPECT_THAT(Errors("name: a\n---\n, b\n"), ElementsAre(HasSubstr("job.yaml:3:1: YAML syntax error")));
  EXPECT_THAT(Errors("\"a\", b\n"), ElementsAre(HasSubstr("YAML syntax error")));
  EXPECT_THAT(Errors("{\"name\": \"a\"}\n, 1\n", "a.json"), ElementsAre(HasSubstr("a.json:2:1: JSON syntax error")));
  // Several documents, empty ones included, still read.
  auto two = Yaml("---\n---\nname: a\nuser: u\ncommand: [x]\nresources: {cpu: 1, memory: 1Gi}\n---\n"
                  "name: b\nuser: u\ncommand: [x]\nresources: {cpu: 1, memory: 1Gi}\n");
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->size(), 2u);
}

TEST(SpecTest, JsonErrorsHaveLines) {
  EXPECT_THAT(Errors("{\n  \"name\": \"a\",\n  \"user\": \"u\",\n  \"command\": [\"x\"],\n"
                     "  \"resources\": {\"cpu\": 1, \"memory\": \"1Gi\", \"cpus\": 2}\n}\n",
                     "a.json"),
              ElementsAre("a.json:5:44: resources: unknown field 'cpus' (did you mean 'cpu'?)"));
  EXPECT_THAT(Errors("{\"name\": \"a\",\n\"user\": [\"u\"\n}\n", "a.json"),
              ElementsAre("a.json:3:1: JSON syntax error: illegal flow end"));
}

// --- Jsonnet -------------------------------------------------------------------------------

TEST(SpecTest, JsonnetImportsOnlyBesideTheSpecAndWithinLimits) {
  char tmpl[] = "/tmp/herd-jsonnet-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::filesystem::create_directories(dir + "/specs/lib");
  std::ofstream(dir + "/secret.txt") << "TOP-SECRET-LINE\n";
  std::ofstream(dir + "/specs/lib/common.libsonnet") << "{ cpu: '100m' }\n";
  // Allowed: beside the spec and below it.
  std::ofstream(dir + "/specs/ok.jsonnet")
      << "local c = import 'lib/common.libsonnet';\n"
         "{ name: 'a', user: 'u', command: ['x'], resources: { cpu: c.cpu, memory: '1Gi' } }\n";
  auto ok = ParseFile(dir + "/specs/ok.jsonnet");
  EXPECT_TRUE(ok.ok()) << ok.status();
  // Refused by name, content never read: outside by absolute path, by "..",
  // and through a symlink.
  std::filesystem::create_symlink(dir + "/secret.txt", dir + "/specs/link.txt");
  for (const std::string& target : {dir + "/secret.txt", std::string("../secret.txt"), std::string("link.txt"),
                                    std::string("/etc/shadow")}) {
    std::ofstream(dir + "/specs/steal.jsonnet") << "{ name: importstr '" << target << "' }\n";
    auto st = ParseFile(dir + "/specs/steal.jsonnet").status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << target;
    EXPECT_THAT(std::string(st.message()), HasSubstr("imports are allowed only beside the spec")) << target;
    EXPECT_THAT(std::string(st.message()), Not(HasSubstr("TOP-SECRET"))) << st;
  }
  // A fold that would run for minutes stops at the CPU limit.
  jsonnet::Limits tight;
  tight.cpu_seconds = 1;
  tight.wall_ms = 20'000;
  auto slow = jsonnet::EvaluateSnippet("std.foldl(function(a, b) a + b, std.range(1, 50000000), 0)", "slow.jsonnet",
                                       tight);
  ASSERT_FALSE(slow.ok());
  EXPECT_THAT(std::string(slow.status().message()), HasSubstr("more than 1 s of CPU")) << slow.status();
  // One that would take gigabytes stops at the memory limit.
  jsonnet::Limits small;
  small.memory_bytes = 256ll << 20;
  auto fat = jsonnet::EvaluateSnippet("std.length(std.makeArray(100000000, function(i) [i]))", "fat.jsonnet", small);
  ASSERT_FALSE(fat.ok());
  EXPECT_THAT(std::string(fat.status().message()), AnyOf(HasSubstr("memory"), HasSubstr("of CPU"))) << fat.status();
  std::filesystem::remove_all(dir);
}

TEST(SpecTest, JsonnetWithFunctionAndImport) {
  auto specs = ParseFile(kTestdata + "/jobs.jsonnet");
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 3u);
  ExpectProto((*specs)[1], Proto(absl::StrCat(R"pb(
    name: "index-2" user: "bob" priority: 100 task_count: 8
    task {
      command: "/usr/bin/worker" command: "--shard=${task.index}" command: "--of=8"
      resources { cpu_millis: 500 memory_bytes: 268435456 }
    }
    restart { mode: NEVER backoff_initial_ms: 1000 backoff_max_ms: 60000 }
    grace_period_ms: 10000
    appclass: BATCH
    source: ")pb", kTestdata, R"pb(/jobs.jsonnet")pb")));
  EXPECT_EQ((*specs)[2].name(), "merge");
  EXPECT_EQ((*specs)[2].priority(), 116);
  EXPECT_EQ((*specs)[2].task().resources().memory_bytes(), 1 << 30);
}

TEST(SpecTest, JsonnetErrorsUseFieldPaths) {
  std::string path = kTestdata + "/bad.jsonnet";
  auto specs = ParseFile(path);
  ASSERT_FALSE(specs.ok());
  EXPECT_EQ(specs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(absl::StrSplit(specs.status().message(), '\n'),
              ElementsAre(path + ": jobs[1]: unknown field 'comand' (did you mean 'command'?)",
                          HasSubstr(path + ": jobs[1].resources.memory: unknown unit 'Mb' in '64Mb'")));
}

TEST(SpecTest, JsonnetOwnErrorsKeepTheirLines) {
  auto specs = ParseFile(kTestdata + "/syntax_error.jsonnet");
  ASSERT_FALSE(specs.ok());
  EXPECT_EQ(specs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(specs.status().message(), HasSubstr("syntax_error.jsonnet:4:1"));
  specs = ParseFile(kTestdata + "/runtime_error.jsonnet");
  ASSERT_FALSE(specs.ok());
  EXPECT_THAT(specs.status().message(), HasSubstr("RUNTIME ERROR"));
  EXPECT_THAT(specs.status().message(), HasSubstr("runtime_error.jsonnet:2:"));
}

TEST(SpecTest, JsonnetSnippetImportsRelativeToSourceName) {
  auto specs = ParseText("(import 'lib/jobs.libsonnet').shard('x', 2)", kTestdata + "/inline.jsonnet",
                         Format::kAuto);
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 1u);
  EXPECT_EQ((*specs)[0].task_count(), 2);
}

// --- Overrides -----------------------------------------------------------------------------

TEST(SpecTest, OverridesResolvePerTask) {
  v1::JobSpec s = One(R"(
name: web
user: alice
tasks: 4
command: [/bin/web, "--shard=${task.index}"]
env: {ROLE: follower, ZONE: a}
resources: {cpu: 1, memory: 1Gi, ports: [http]}
overrides:
  - index: 0
    command: [/bin/web, --leader, "--port=${port.http}"]
    env: {ROLE: leader}
    resources: {memory: 4Gi}
  - range: 2-3
    args: ["--of=${task.count}"]
  - indexes: [3]
    resources: {cpu: 2}
)");
  v1::TaskTemplate t0 = cell::ResolveTask(s, 0);
  EXPECT_THAT(t0.command(), ElementsAre("/bin/web", "--leader", "--port=${port.http}"));
  EXPECT_EQ(t0.env().at("ROLE"), "leader");
  EXPECT_EQ(t0.env().at("ZONE"), "a");
  EXPECT_EQ(t0.resources().memory_bytes(), int64_t{4} << 30);
  v1::TaskTemplate t1 = cell::ResolveTask(s, 1);
  EXPECT_THAT(t1.command(), ElementsAre("/bin/web", "--shard=1"));
  EXPECT_TRUE(t1.args().empty());
  EXPECT_EQ(t1.env().at("ROLE"), "follower");
  EXPECT_EQ(t1.resources().memory_bytes(), int64_t{1} << 30);
  v1::TaskTemplate t3 = cell::ResolveTask(s, 3);
  EXPECT_THAT(t3.command(), ElementsAre("/bin/web", "--shard=3"));
  EXPECT_THAT(t3.args(), ElementsAre("--of=4"));
  EXPECT_EQ(t3.resources().cpu_millis(), 2000);
}

TEST(SpecTest, OverridesMapForm) {
  v1::JobSpec s = One(R"(
name: web
user: alice
tasks: 6
command: [/bin/web]
resources: {cpu: 1, memory: 1Gi}
overrides:
  "0": {args: [--leader]}
  "1-2": {args: [--standby]}
  "3,5": {resources: {cpu: 500m}}
)");
  ASSERT_EQ(s.overrides_size(), 3);
  EXPECT_THAT(s.overrides(1).indexes(), ElementsAre(1, 2));
  EXPECT_THAT(s.overrides(2).indexes(), ElementsAre(3, 5));
  EXPECT_THAT(cell::ResolveTask(s, 0).args(), ElementsAre("--leader"));
  EXPECT_THAT(cell::ResolveTask(s, 2).args(), ElementsAre("--standby"));
  EXPECT_EQ(cell::ResolveTask(s, 5).resources().cpu_millis(), 500);
  EXPECT_TRUE(cell::ResolveTask(s, 4).args().empty());
}

// --- Files ---------------------------------------------------------------------------------

TEST(SpecTest, MissingFileIsNotFound) {
  auto specs = ParseFile(kTestdata + "/no-such-file.yaml");
  EXPECT_EQ(specs.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(specs.status().message(), HasSubstr("no-such-file.yaml"));
}

TEST(SpecTest, FormatFromExtension) {
  EXPECT_EQ(FormatForPath("a.yaml"), Format::kYaml);
  EXPECT_EQ(FormatForPath("a.YML"), Format::kYaml);
  EXPECT_EQ(FormatForPath("a.json"), Format::kJson);
  EXPECT_EQ(FormatForPath("a.jsonnet"), Format::kJsonnet);
  EXPECT_EQ(FormatForPath("a.libsonnet"), Format::kJsonnet);
  EXPECT_EQ(FormatForPath("Jobfile"), Format::kYaml);
}

TEST(SpecTest, ExplicitFormatOverridesExtension) {
  auto specs = ParseText("{name: 'j', user: 'u', command: 'x', resources: {cpu: 1, memory: '1Gi'}}", "spec.txt",
                         Format::kJsonnet);
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_EQ((*specs)[0].name(), "j");
}

TEST(SpecTest, PackagesHealthChecksAndIsolation) {
  const std::string digest(64, 'a');
  v1::JobSpec s = One(absl::StrCat(R"(
name: web
user: alice
command: [bin/web]
resources: {cpu: 1, memory: 1Gi, ports: [http]}
packages:
  - {name: web, sha256: )", digest, R"(, url: "http://pkg.example/web.tar", size: 10Mi}
  - {name: conf, sha256: )", digest, R"(, url: /srv/conf.tar}
  - {name: tls, sha256: )", digest, R"(, url: "https://pkg.example/tls.tar"}
health_check:
  http: {port: http, path: /healthz}
  interval: 5s
  timeout: 500ms
  failure_threshold: 2
  initial_delay: 1s
  latency_bound: 50ms
isolation: {namespaces: true, root_from_packages: true, user: nobody}
)"));
  const v1::TaskTemplate& t = s.task();
  ASSERT_EQ(t.packages_size(), 3);
  EXPECT_EQ(t.packages(2).url(), "https://pkg.example/tls.tar");
  EXPECT_EQ(t.packages(0).name(), "web");
  EXPECT_EQ(t.packages(0).sha256(), digest);
  EXPECT_EQ(t.packages(0).url(), "http://pkg.example/web.tar");
  EXPECT_EQ(t.packages(0).size_bytes(), 10 << 20);
  EXPECT_EQ(t.health_check().http().port(), "http");
  EXPECT_EQ(t.health_check().http().path(), "/healthz");
  EXPECT_EQ(t.health_check().interval_ms(), 5000);
  EXPECT_EQ(t.health_check().timeout_ms(), 500);
  EXPECT_EQ(t.health_check().failure_threshold(), 2);
  EXPECT_EQ(t.health_check().initial_delay_ms(), 1000);
  EXPECT_EQ(t.health_check().latency_bound_ms(), 50);
  EXPECT_TRUE(t.isolation().namespaces());
  EXPECT_TRUE(t.isolation().root_from_packages());
  EXPECT_EQ(t.isolation().user(), "nobody");

  v1::JobSpec c = One("name: h\nuser: u\ncommand: x\nresources: {cpu: 1, memory: 1Gi}\n"
                      "health_check: {command: [/bin/check, --quick]}\n");
  EXPECT_THAT(c.task().health_check().command().argv(), ElementsAre("/bin/check", "--quick"));
  v1::JobSpec tcp = One("name: h\nuser: u\ncommand: x\nresources: {cpu: 1, memory: 1Gi, ports: [db]}\n"
                        "health_check: {tcp: db}\n");
  EXPECT_EQ(tcp.task().health_check().tcp().port(), "db");
}

TEST(SpecTest, PackageHealthAndIsolationErrors) {
  const std::string job = "name: h\nuser: u\ncommand: x\nresources: {cpu: 1, memory: 1Gi, ports: [http]}\n";
  EXPECT_THAT(Errors(absl::StrCat(job, "packages:\n  - {name: web, sha256: abc, url: web.tar}\n")),
              ElementsAre(HasSubstr("job.yaml:6:25: packages[0].sha256: 'abc' is not a SHA-256 digest"),
                          HasSubstr("packages[0].url: 'web.tar' is not an absolute path")));
  EXPECT_THAT(Errors(absl::StrCat(job, "packages:\n  - {sha256: ", std::string(64, 'b'), ", url: /a.tar}\n")),
              ElementsAre(HasSubstr("packages[0].name: missing")));
  EXPECT_THAT(Errors(absl::StrCat(job, "packages:\n  - {name: a, sha256: ", std::string(64, 'b'),
                                  ", url: /a.tar, version: 2}\n")),
              ElementsAre(HasSubstr("unknown field 'version'")));
  EXPECT_THAT(Errors(absl::StrCat(job, "health_check: {http: {port: admin}}\n")),
              ElementsAre("job.yaml:5:29: health_check.http.port: 'admin' is not one of the task's named ports "
                          "(resources.ports: [http])"));
  EXPECT_THAT(Errors(absl::StrCat(job, "health_check: {interval: 5s}\n")),
              ElementsAre(HasSubstr("say how to check: one of http:, tcp: or command:")));
  EXPECT_THAT(Errors(absl::StrCat(job, "health_check: {tcp: http, command: [x]}\n")),
              ElementsAre(HasSubstr("give only one of http:, tcp: and command:")));
  EXPECT_THAT(Errors(absl::StrCat(job, "health_check: {tcp: http, interval: 1s, timeout: 5s}\n")),
              ElementsAre(HasSubstr("health_check.timeout: 5s must be positive and no longer than the interval")));
  EXPECT_THAT(Errors(absl::StrCat(job, "health_check: {tcp: http, timeout: 200ms, latency_bound: 300ms}\n")),
              ElementsAre(HasSubstr("health_check.latency_bound: 300ms must be positive and no longer than the "
                                    "timeout (200ms)")));
  // A valid spec: whether its owner may run tasks as root is the master's
  // to decide (the run-as-root capability).
  EXPECT_EQ(One(absl::StrCat(job, "isolation: {user: root}\n")).task().isolation().user(), "root");
  EXPECT_THAT(Errors(absl::StrCat(job, "isolation: {root_from_packages: true}\n")),
              ElementsAre(HasSubstr("isolation.root_from_packages: the task has no packages")));
  EXPECT_THAT(Errors(absl::StrCat(job, "isolation: {namespace: true}\n")),
              ElementsAre(HasSubstr("unknown field 'namespace' (did you mean 'namespaces'?)")));
}

}  // namespace
}  // namespace herd::spec

namespace herd::spec {
namespace {

TEST(SpecTest, PlacementLimits) {
  v1::JobSpec s = One(absl::StrCat(
      "name: h\nuser: u\ncommand: x\nresources: {cpu: 1, memory: 1Gi}\ntasks: 4\n",
      "different_machines: true\nmax_per_domain: {rack: 2, machine: 1}\n"));
  EXPECT_TRUE(s.different_machines());
  EXPECT_EQ(s.max_per_domain().at("rack"), 2);
  EXPECT_EQ(s.max_per_domain().at("machine"), 1);
  EXPECT_THAT(Errors("name: h\nuser: u\ncommand: x\nresources: {cpu: 1, memory: 1Gi}\nmax_per_domain: {rack: 0}\n"),
              ElementsAre("job.yaml:5:24: max_per_domain.rack: must be at least 1, got 0"));
  EXPECT_THAT(Errors("name: h\nuser: u\ncommand: x\nresources: {cpu: 1, memory: 1Gi}\ndifferent_machines: maybe\n"),
              ElementsAre(HasSubstr("different_machines")));
}

// at_most_once (issue #11): off unless asked for, in every format.
// disruption_budget (issue #12): a count or a percentage, validated.
TEST(SpecTest, DisruptionBudget) {
  const std::string job = "name: h\nuser: u\ncommand: x\nresources: {cpu: 1, memory: 1Gi}\n";
  EXPECT_FALSE(One(job).has_disruption_budget());
  EXPECT_EQ(One(absl::StrCat(job, "disruption_budget: {max_unavailable: 2}\n")).disruption_budget().max_unavailable(),
            2);
  EXPECT_EQ(One(absl::StrCat(job, "disruption_budget: {max_unavailable: 25%}\n"))
                .disruption_budget()
                .max_unavailable_percent(),
            25);
  EXPECT_THAT(Errors(absl::StrCat(job, "disruption_budget: {max_unavailable: 0}\n")),
              ElementsAre(HasSubstr("job.yaml:5:38: disruption_budget.max_unavailable: expected at least 1")));
  EXPECT_THAT(Errors(absl::StrCat(job, "disruption_budget: {max_unavailable: 150%}\n")),
              ElementsAre(HasSubstr("percentage from 1% to 100%, got '150%'")));
  EXPECT_THAT(Errors(absl::StrCat(job, "disruption_budget: {max_unavailble: 1}\n")),
              ElementsAre(HasSubstr("unknown field 'max_unavailble'")));
}

// update (issue #14): a rolling update, Nomad's defaults once given.
TEST(SpecTest, UpdateStrategy) {
  const std::string job = "name: h\nuser: u\ncommand: x\nresources: {cpu: 1, memory: 1Gi}\n";
  EXPECT_FALSE(One(job).has_update());
  v1::UpdateStrategy d = One(absl::StrCat(job, "update: {}\n")).update();
  EXPECT_EQ(d.max_unavailable(), 1);
  EXPECT_EQ(d.min_healthy_time_ms(), 10'000);
  EXPECT_EQ(d.progress_deadline_ms(), 600'000);
  EXPECT_EQ(d.canary(), 0);
  EXPECT_FALSE(d.auto_rollback());
  v1::UpdateStrategy u = One(absl::StrCat(job,
                                          "update: {max_unavailable: 25%, min_healthy_time: 3s, canary: 2, "
                                          "auto_rollback: true, progress_deadline: 5m}\n"))
                             .update();
  EXPECT_EQ(u.max_unavailable(), 0);
  EXPECT_EQ(u.max_unavailable_percent(), 25);
  EXPECT_EQ(u.min_healthy_time_ms(), 3'000);
  EXPECT_EQ(u.canary(), 2);
  EXPECT_TRUE(u.auto_rollback());
  EXPECT_EQ(u.progress_deadline_ms(), 300'000);
  EXPECT_THAT(Errors(absl::StrCat(job, "update: {max_unavailable: 0}\n")),
              ElementsAre(HasSubstr("job.yaml:5:27: update.max_unavailable: expected at least 1")));
  EXPECT_THAT(Errors(absl::StrCat(job, "update: {progress_deadline: 48h}\n")),
              ElementsAre(HasSubstr("update.progress_deadline: at most")));
  EXPECT_THAT(Errors(absl::StrCat(job, "update: {canery: 1}\n")), ElementsAre(HasSubstr("unknown field 'canery'")));
  // Validation of a spec that did not come through a file (the API).
  v1::JobSpec bad = One(job);
  bad.mutable_update()->set_canary(-1);
  bad.mutable_update()->set_min_healthy_time_ms(-5);
  absl::Status st = Validate(bad);
  EXPECT_THAT(std::string(st.message()), HasSubstr("update.canary: must be 0 to 100000, got -1"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("update.min_healthy_time: must be 0"));
}

TEST(SpecTest, AtMostOnce) {
  const std::string job = "name: h\nuser: u\ncommand: x\nresources: {cpu: 1, memory: 1Gi}\n";
  EXPECT_FALSE(One(job).at_most_once());
  EXPECT_TRUE(One(absl::StrCat(job, "at_most_once: true\n")).at_most_once());
  EXPECT_FALSE(One(absl::StrCat(job, "at_most_once: false\n")).at_most_once());
  EXPECT_TRUE(One(R"({"name": "h", "user": "u", "command": ["x"], "resources": {"cpu": 1, "memory": "1Gi"},
                     "at_most_once": true})",
                  "a.json")
                  .at_most_once());
  auto jsonnet = ParseText("{ name: 'h', user: 'u', command: ['x'], resources: { cpu: 1, memory: '1Gi' },\n"
                           "  at_most_once: 1 < 2 }\n",
                           "a.jsonnet", Format::kJsonnet);
  ASSERT_TRUE(jsonnet.ok()) << jsonnet.status();
  ASSERT_EQ(jsonnet->size(), 1u);
  EXPECT_TRUE((*jsonnet)[0].at_most_once());
  EXPECT_THAT(Errors(absl::StrCat(job, "at_most_once: sometimes\n")),
              ElementsAre("job.yaml:5:15: at_most_once: expected true or false, got 'sometimes'"));
  EXPECT_THAT(Errors(absl::StrCat(job, "at_most_one: true\n")),
              ElementsAre(HasSubstr("unknown field 'at_most_one' (did you mean 'at_most_once'?)")));
}

}  // namespace
}  // namespace herd::spec

namespace herd::spec {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(SpecBatchTest, AfterScheduleTimeZoneAndConcurrencyParse) {
  auto specs = ParseText(R"(jobs:
  - {name: fetch, user: alice, command: [/bin/true], resources: {cpu: 1, memory: 1Gi}}
  - {name: train, user: alice, after: [fetch, bob/data], command: [/bin/true], resources: {cpu: 1, memory: 1Gi}}
  - name: nightly
    user: alice
    schedule: "30 2 * * mon-fri"
    time_zone: Europe/Berlin
    concurrency: Replace
    command: [/bin/true]
    resources: {cpu: 1, memory: 1Gi}
)",
                         "jobs.yaml", Format::kAuto);
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 3u);
  // A bare name is the same user's job.
  EXPECT_THAT((*specs)[1].after(), ElementsAre("alice/fetch", "bob/data"));
  EXPECT_EQ((*specs)[2].schedule(), "30 2 * * mon-fri");
  EXPECT_EQ((*specs)[2].time_zone(), "Europe/Berlin");
  EXPECT_EQ((*specs)[2].concurrency(), v1::REPLACE);
}

TEST(SpecBatchTest, ErrorsPointAtTheirLine) {
  auto errors = [](absl::string_view text) {
    auto specs = ParseText(text, "job.yaml", Format::kAuto);
    EXPECT_FALSE(specs.ok());
    return std::string(specs.status().message());
  };
  const std::string head = "name: n\nuser: alice\ncommand: [/bin/true]\nresources: {cpu: 1, memory: 1Gi}\n";
  EXPECT_EQ(errors(head + "schedule: \"61 * * * *\"\n"), "job.yaml:5:11: schedule: minute field '61': 61 is outside 0-59");
  EXPECT_EQ(errors(head + "schedule: \"* * * * *\"\ntime_zone: Mars/Base\n"),
            "job.yaml:6:12: time_zone: unknown time zone 'Mars/Base' (an IANA name, e.g. Europe/Berlin, "
            "America/New_York or UTC)");
  EXPECT_EQ(errors(head + "schedule: \"* * * * *\"\nconcurrency: sometimes\n"),
            "job.yaml:6:14: concurrency: unknown policy 'sometimes'; use forbid (skip a run while the last is live), "
            "allow or replace");
  EXPECT_EQ(errors(head + "concurrency: allow\n"),
            "job.yaml:5:14: concurrency: only for a scheduled job (schedule:)");
  EXPECT_EQ(errors(head + "after: fetch\n"),
            "job.yaml:5:8: after: expected a list of jobs to wait for, e.g. [build, alice/fetch], got 'fetch'");
  EXPECT_EQ(errors(head + "after: [n]\n"), "job.yaml:5:9: after[0]: a job cannot wait for itself");
  EXPECT_EQ(errors(head + "after:\n  - a\n  - Bad/x\n"),
            "job.yaml:7:5: after[1]: 'Bad/x' is not a job (USER/NAME)");
}

TEST(SpecBatchTest, CheckAfterReportsMissingJobsAtTheirLine) {
  ParseOptions opts;
  std::vector<std::string> asked;
  opts.check_after = [&](const std::string& id) -> std::string {
    asked.push_back(id);
    return id == "alice/fetch" ? "" : "there is no job " + id;
  };
  auto specs = ParseText(
      "name: n\nuser: alice\ncommand: [/bin/true]\nresources: {cpu: 1, memory: 1Gi}\nafter:\n  - fetch\n  - biuld\n",
      "job.yaml", Format::kAuto, opts);
  ASSERT_FALSE(specs.ok());
  EXPECT_EQ(specs.status().message(), "job.yaml:7:5: after[1]: there is no job alice/biuld");
  EXPECT_THAT(asked, ElementsAre("alice/fetch", "alice/biuld"));
}

}  // namespace
}  // namespace herd::spec
