#include "cell/task_template.h"

#include <gtest/gtest.h>

#include "testing/builders.h"

namespace herd::cell {
namespace {

TEST(TaskTemplate, SubstitutesAndOverrides) {
  v1::JobSpec s = testing::JobBuilder("hello").Tasks(3).Command({"/bin/sh", "-c", "echo ${task.index} of ${task.count} $${x}"}).Build();
  (*s.mutable_task()->mutable_env())["NAME"] = "${job.user}-${job.name}-${task.index}";
  v1::TaskOverride* o = s.add_overrides();
  o->add_indexes(2);
  o->add_command("/bin/echo");
  o->add_command("special ${task.index}");
  o->set_memory_bytes(1 << 30);
  v1::TaskTemplate t0 = ResolveTask(s, 0);
  EXPECT_EQ(t0.command(2), "echo 0 of 3 ${x}");
  EXPECT_EQ(t0.env().at("NAME"), "alice-hello-0");
  v1::TaskTemplate t2 = ResolveTask(s, 2);
  EXPECT_EQ(t2.command(0), "/bin/echo");
  EXPECT_EQ(t2.command(1), "special 2");
  EXPECT_EQ(t2.resources().memory_bytes(), 1 << 30);
  EXPECT_EQ(TaskResources(s, 2).memory_bytes, 1 << 30);
  EXPECT_EQ(TaskResources(s, 1).memory_bytes, 64 << 20);
}

TEST(TaskTemplate, CheckVariables) {
  v1::JobSpec s = testing::JobBuilder("x").Build();
  s.mutable_task()->add_port_names("http");
  EXPECT_TRUE(CheckVariables("run ${task.index} on ${port.http}", s).ok());
  absl::Status st = CheckVariables("${task.idx}", s);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("unknown variable ${task.idx}"), std::string::npos);
  EXPECT_FALSE(CheckVariables("${port.grpc}", s).ok());
  EXPECT_TRUE(CheckVariables("$${literal}", s).ok());
}

}  // namespace
}  // namespace herd::cell
