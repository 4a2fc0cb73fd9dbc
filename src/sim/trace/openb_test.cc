#include "sim/trace/openb.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/ids.h"
#include "spec/validate.h"

namespace herd::sim {
namespace {

namespace fs = std::filesystem;

std::string Write(const std::string& name, const std::string& text) {
  std::string path = (fs::temp_directory_path() / absl::StrCat(name, "_", ::getpid(), ".csv")).string();
  std::ofstream(path) << text;
  return path;
}

std::string Message(const absl::Status& st) { return std::string(st.message()); }

TEST(Openb, Nodes) {
  std::string path = Write("herd_openb_nodes",
                           "sn,cpu_milli,memory_mib,gpu,model\n"
                           "node-a,32000,262144,0,\n"
                           "node-b,96000,786432,8,V100M32\n");
  auto r = LoadOpenbNodes(path);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  const v1::Machine& a = (*r)[0];
  EXPECT_EQ(a.name(), "node-a");
  EXPECT_EQ(a.capacity().cpu_millis(), 32000);
  EXPECT_EQ(a.capacity().memory_bytes(), 262144LL << 20);
  EXPECT_EQ(a.capacity().ports(), 1000);
  EXPECT_TRUE(a.capacity().extended().empty());
  EXPECT_EQ(a.attributes().at("gpu_count"), "0");
  EXPECT_FALSE(a.attributes().contains("gpu_model"));
  const v1::Machine& b = (*r)[1];
  EXPECT_EQ(b.capacity().extended().at("gpu_milli"), 8000);
  EXPECT_EQ(b.attributes().at("gpu_model"), "V100M32");
  EXPECT_EQ(b.attributes().at("gpu_count"), "8");
  std::remove(path.c_str());

  // Columns by name; errors name file:line and column.
  path = Write("herd_openb_nodes_bad", "model,gpu,sn,memory_mib,cpu_milli\nT4,2,n1,1024,4000\n,0,n2,1024,lots\n");
  r = LoadOpenbNodes(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(Message(r.status()).find(".csv:3: column 'cpu_milli': 'lots' is not"), std::string::npos) << r.status();
  std::remove(path.c_str());
  path = Write("herd_openb_nodes_nogpu", "sn,cpu_milli,memory_mib\nn1,4000,1024\n");
  EXPECT_NE(Message(LoadOpenbNodes(path).status()).find(":1: missing column 'gpu'"), std::string::npos);
  std::remove(path.c_str());
}

TEST(Openb, PodsWithEveryColumn) {
  std::string path = Write("herd_openb_pods_full",
                           "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
                           "deletion_time,scheduled_time\n"
                           "openb-pod-0000,12000,16384,1,460,,LS,Running,0,12537496,0\n"
                           "openb-pod-0001,6000,12288,2,1000,V100M16|V100M32|V100M32,BE,Failed,5,,\n"
                           "openb-pod-0002,0,0,0,0,,Guaranteed,Pending,7,9,\n"
                           "Openb_Pod#3,100,1,1,,,Burstable,Succeeded,1,2,1\n");
  auto pods = LoadOpenbPods(path);
  ASSERT_TRUE(pods.ok()) << pods.status();
  ASSERT_EQ(pods->size(), 4u);
  EXPECT_EQ((*pods)[1].gpu_spec, (std::vector<std::string>{"V100M16", "V100M32"}));
  EXPECT_EQ((*pods)[1].deletion_time, -1);
  EXPECT_EQ((*pods)[0].deletion_time, 12537496);
  std::vector<v1::JobSpec> jobs = JobsFromPods(*pods);
  ASSERT_EQ(jobs.size(), 4u);
  for (const v1::JobSpec& s : jobs) EXPECT_TRUE(spec::Validate(s).ok()) << s.name() << ": " << spec::Validate(s);
  EXPECT_EQ(jobs[0].name(), "openb-pod-0000");
  EXPECT_EQ(jobs[0].user(), "openb");
  EXPECT_EQ(jobs[0].task_count(), 1);
  EXPECT_EQ(jobs[0].priority(), 200);
  EXPECT_EQ(jobs[0].appclass(), v1::LATENCY_SENSITIVE);
  EXPECT_EQ(jobs[0].task().resources().cpu_millis(), 12000);
  EXPECT_EQ(jobs[0].task().resources().memory_bytes(), 16384LL << 20);
  EXPECT_EQ(jobs[0].task().resources().extended().at("gpu_milli"), 460);  // a share of one GPU
  EXPECT_EQ(jobs[0].constraints_size(), 0);
  EXPECT_EQ(jobs[1].priority(), 100);
  EXPECT_EQ(jobs[1].appclass(), v1::BATCH);
  EXPECT_EQ(jobs[1].task().resources().extended().at("gpu_milli"), 2000);  // whole GPUs
  ASSERT_EQ(jobs[1].constraints_size(), 1);
  EXPECT_EQ(jobs[1].constraints(0).attribute(), "gpu_model");
  EXPECT_EQ(jobs[1].constraints(0).op(), v1::Constraint::IN);
  EXPECT_EQ(jobs[1].constraints(0).values_size(), 2);
  EXPECT_EQ(jobs[1].labels().at("pod-phase"), "Failed");  // failed pods are still jobs
  EXPECT_EQ(jobs[2].priority(), 250);
  EXPECT_EQ(jobs[2].task().resources().cpu_millis(), 1);  // at least 1 millicore, 1 MiB
  EXPECT_EQ(jobs[2].task().resources().memory_bytes(), 1LL << 20);
  EXPECT_TRUE(jobs[2].task().resources().extended().empty());
  EXPECT_EQ(jobs[3].priority(), 116);
  EXPECT_EQ(jobs[3].name(), "openb_pod-3");
  EXPECT_EQ(jobs[3].task().resources().extended().at("gpu_milli"), 1000);  // share not given: a whole GPU
  std::remove(path.c_str());
}

TEST(Openb, PodsWithFewerReorderedColumns) {
  std::string path = Write("herd_openb_pods_short",
                           "num_gpu,name,gpu_milli,memory_mib,cpu_milli\n"
                           "8,openb-pod-0000,1000,65536,64000\n"
                           "1,openb-pod-0000,300,1024,500\n");
  auto pods = LoadOpenbPods(path);
  ASSERT_TRUE(pods.ok()) << pods.status();
  std::vector<v1::JobSpec> jobs = JobsFromPods(*pods);
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].task().resources().extended().at("gpu_milli"), 8000);
  EXPECT_EQ(jobs[0].task().resources().cpu_millis(), 64000);
  EXPECT_EQ(jobs[0].priority(), 200);  // no qos column: LS
  EXPECT_EQ(jobs[1].name(), "openb-pod-0000-2");  // colliding names made unique
  EXPECT_EQ(jobs[1].task().resources().extended().at("gpu_milli"), 300);
  std::remove(path.c_str());
}

TEST(Openb, BadPodRowsSayWhere) {
  struct Case {
    std::string text, want;
  };
  const Case cases[] = {
      {"name,cpu_milli,memory_mib,num_gpu\np,1,1,0\n", ":1: missing column 'gpu_milli'"},
      {"name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,0,0\nq,1,x1,0,0\n",
       ":3: column 'memory_mib': 'x1' is not a non-negative integer"},
      {"name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,0\n", ":2: 4 fields, but the header has 5 columns"},
      {"name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,-5,1,0,0\n", ":2: column 'cpu_milli'"},
      {"name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,1500\n", ":2: column 'gpu_milli'"},
      {"name,cpu_milli,memory_mib,num_gpu,gpu_milli,qos\np,1,1,0,0,Gold\n", ":2: column 'qos'"},
      {"name,cpu_milli,memory_mib,num_gpu,gpu_milli\n,1,1,0,0\n", ":2: column 'name' is empty"},
  };
  for (const Case& c : cases) {
    std::string path = Write("herd_openb_pods_bad", c.text);
    auto r = LoadOpenbPods(path);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(Message(r.status()).find(c.want), std::string::npos) << r.status() << " want " << c.want;
    EXPECT_NE(Message(r.status()).find("herd_openb_pods_bad"), std::string::npos);
    std::remove(path.c_str());
  }
  EXPECT_EQ(LoadOpenbPods("/nonexistent.csv").status().code(), absl::StatusCode::kNotFound);
}

TEST(Openb, NamesAreValid) {
  for (const std::string& n : std::vector<std::string>{"openb-pod-0001", "9lives", "UPPER.case.", "a b/c", std::string(100, 'x'), "-"}) {
    std::string j = OpenbJobName(n);
    EXPECT_TRUE(ValidateJobName(j).ok()) << n << " -> " << j;
    EXPECT_EQ(j, OpenbJobName(n));
  }
  EXPECT_NE(OpenbJobName(std::string(100, 'x')), OpenbJobName(std::string(101, 'x')));
}

std::string TraceDir() {
  const char* env = std::getenv("HERD_TRACES");
  return std::string(env ? env : "") + "/alibaba-openb-2023";
}

TEST(Openb, TheRealNodeList) {
  std::string path = TraceDir() + "/openb_node_list_all_node.csv";
  if (!fs::exists(path)) GTEST_SKIP() << "trace not found at " << path;
  auto r = LoadOpenbNodes(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->size(), 1523u);
  int gpu_nodes = 0;
  std::set<std::string> models;
  for (const v1::Machine& m : *r) {
    if (m.capacity().extended().contains("gpu_milli")) {
      ++gpu_nodes;
      models.insert(m.attributes().at("gpu_model"));
    }
  }
  EXPECT_GT(gpu_nodes, 1000);
  EXPECT_GE(models.size(), 5u);
  std::cout << r->size() << " nodes, " << gpu_nodes << " with GPUs, " << models.size() << " GPU models\n";
}

TEST(Openb, TheRealPodLists) {
  for (auto [file, n] : {std::pair<const char*, size_t>{"openb_pod_list_gpuspec20.csv", 8152},
                         {"openb_pod_list_multigpu30.csv", 8508}}) {
    std::string path = TraceDir() + "/" + file;
    if (!fs::exists(path)) GTEST_SKIP() << "trace not found at " << path;
    auto pods = LoadOpenbPods(path);
    ASSERT_TRUE(pods.ok()) << pods.status();
    EXPECT_EQ(pods->size(), n) << file;
    std::vector<v1::JobSpec> jobs = JobsFromPods(*pods);
    std::set<std::string> names;
    int constrained = 0, gpu = 0;
    for (const v1::JobSpec& s : jobs) {
      absl::Status v = spec::Validate(s);
      EXPECT_TRUE(v.ok()) << s.name() << ": " << v;
      if (!v.ok()) break;
      EXPECT_TRUE(names.insert(s.name()).second);
      constrained += s.constraints_size() > 0;
      gpu += s.task().resources().extended().contains("gpu_milli");
    }
    EXPECT_GT(gpu, static_cast<int>(n / 2)) << file;
    if (std::string(file).find("gpuspec") != std::string::npos) {
      EXPECT_GT(constrained, 1000);
    }
    std::cout << file << ": " << jobs.size() << " jobs, " << gpu << " with GPUs, " << constrained
              << " with a gpu_model constraint\n";
  }
}

}  // namespace
}  // namespace herd::sim
