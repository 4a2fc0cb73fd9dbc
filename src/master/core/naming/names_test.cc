#include "master/core/naming/names.h"

#include "gtest/gtest.h"
#include "testing/builders.h"

namespace herd::master {
namespace {

using testing::JobBuilder;
using testing::MachineBuilder;

class NamesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Apply(testing::Register(MachineBuilder("m1").Address("10.0.0.1:7071").Build()));
    Apply(testing::Register(MachineBuilder("m2").Address("10.0.0.2:7071").Build()));
    Apply(testing::Register(MachineBuilder("m3").Address("node3.example.com:7071").Build()));
    v1::JobSpec web = JobBuilder("web").Tasks(3).Build();
    web.mutable_task()->add_port_names("http");
    web.mutable_task()->mutable_resources()->set_ports(1);
    web.mutable_task()->mutable_health_check()->mutable_tcp()->set_port("http");
    Apply(testing::Submit(web));
    Apply(testing::Submit(JobBuilder("v2.api").Tasks(1).Build()));
    Apply(testing::Schedule("alice/web", 0, "m1"));
    Apply(testing::Schedule("alice/web", 1, "m2"));
    Apply(testing::Schedule("alice/v2.api", 0, "m3"));
    Report("alice/web", 0, 31000, "healthy");
    Report("alice/web", 1, 31001, "unhealthy: connection refused");
  }

  void Apply(const v1::Mutation& m) { ASSERT_TRUE(s_.Apply(m).ok()) << m.ShortDebugString(); }
  void Report(const std::string& job, int index, int32_t port, const std::string& health) {
    v1::Mutation m = testing::Observed(testing::Ref(job, index, 1), v1::Task::ACTIVE, 100 + index);
    (*m.mutable_task_observed()->mutable_ports())["http"] = port;
    m.mutable_task_observed()->set_health(health);
    Apply(m);
  }
  dns::Response Ask(const std::string& name, uint16_t type) {
    dns::Question q;
    q.name = name;
    q.type = type;
    q.klass = dns::kClassIn;
    return AnswerDns(s_, q, "herd", s_.revision());
  }

  cell::CellState s_{"local"};
};

TEST_F(NamesTest, ARecordCarriesTheNameAddressPortsAndHealth) {
  v1::NameRecord r = NameRecordOf(s_, *s_.FindTask("alice/web", 0), "herd");
  EXPECT_EQ(r.name(), "/local/alice/web/0");
  EXPECT_EQ(r.dns(), "0.web.alice.local.herd");
  EXPECT_EQ(r.job(), "alice/web");
  EXPECT_EQ(r.state(), v1::Task::RUNNING);
  EXPECT_EQ(r.machine(), "m1");
  EXPECT_EQ(r.address(), "10.0.0.1");
  EXPECT_EQ(r.ports().at("http"), 31000);
  EXPECT_EQ(r.health(), "healthy");
  EXPECT_TRUE(r.ready());
  EXPECT_FALSE(NameRecordOf(s_, *s_.FindTask("alice/web", 1), "herd").ready());  // unhealthy
  v1::NameRecord pending = NameRecordOf(s_, *s_.FindTask("alice/web", 2), "herd");
  EXPECT_EQ(pending.state(), v1::Task::PENDING);
  EXPECT_EQ(pending.address(), "");
  EXPECT_FALSE(pending.ready());
  EXPECT_TRUE(NameRecordOf(s_, *s_.FindTask("alice/v2.api", 0), "herd").ready());  // no health check

  EXPECT_EQ(HostOf("10.0.0.1:7071"), "10.0.0.1");
  EXPECT_EQ(HostOf("[::1]:7071"), "::1");
  EXPECT_EQ(HostOf("node3:1"), "node3");
}

TEST_F(NamesTest, FindsEveryFormOfAName) {
  for (const char* name : {"/local/alice/web/1", "alice/web/1", "1.web.alice.local.herd", "1.web.alice.local",
                           "1.WEB.alice.local.herd."}) {
    absl::StatusOr<NameTarget> t = FindName(s_, name, "herd");
    ASSERT_TRUE(t.ok()) << name << ": " << t.status();
    EXPECT_EQ(t->job->id, "alice/web") << name;
    EXPECT_EQ(t->index, 1) << name;
  }
  absl::StatusOr<NameTarget> job = FindName(s_, "web.alice.local.herd", "herd");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->index, -1);
  absl::StatusOr<NameTarget> dotted = FindName(s_, "0.v2.api.alice.local.herd", "herd");
  ASSERT_TRUE(dotted.ok()) << dotted.status();
  EXPECT_EQ(dotted->job->id, "alice/v2.api");

  EXPECT_EQ(FindName(s_, "/other/alice/web/0", "herd").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FindName(s_, "alice/web/7", "herd").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FindName(s_, "alice/nope", "herd").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FindName(s_, "9.web.alice.local.herd", "herd").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FindName(s_, "example.com", "herd").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FindName(s_, "alice/web/01", "herd").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FindName(s_, "a/b/c/d", "herd").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FindName(s_, "", "herd").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FindName(s_, std::string(300, 'a'), "herd").status().code(), absl::StatusCode::kInvalidArgument);

  google::protobuf::RepeatedPtrField<v1::NameRecord> all;
  EXPECT_FALSE(NameRecords(s_, *job, "herd", &all));
  EXPECT_EQ(all.size(), 3);
}

TEST_F(NamesTest, AWatcherSeesOnlyWhatMatters) {
  v1::NameRecord a = NameRecordOf(s_, *s_.FindTask("alice/web", 0), "herd");
  v1::NameRecord b = a;
  b.set_state_revision(a.state_revision() + 5);
  EXPECT_TRUE(SameNameRecord(a, b));
  (*b.mutable_ports())["http"] = 1;
  EXPECT_FALSE(SameNameRecord(a, b));
  b = a;
  b.set_health("unhealthy");
  EXPECT_FALSE(SameNameRecord(a, b));
  b = a;
  b.set_address("10.9.9.9");
  EXPECT_FALSE(SameNameRecord(a, b));
}

TEST_F(NamesTest, DnsAnswersTasksJobsAndNamedPorts) {
  dns::Response task = Ask("0.web.alice.local.herd", dns::kTypeA);
  EXPECT_EQ(task.rcode, dns::kNoError);
  ASSERT_EQ(task.answer.size(), 1u);
  EXPECT_EQ(task.answer[0].rdata, dns::RdataA("10.0.0.1"));
  EXPECT_EQ(task.answer[0].ttl, kDnsTtl);
  // A task's own name answers while it runs, healthy or not.
  ASSERT_EQ(Ask("1.web.alice.local.herd", dns::kTypeA).answer.size(), 1u);
  // The job's name: its ready tasks only (1 is unhealthy, 2 pending).
  dns::Response job = Ask("web.alice.local.herd", dns::kTypeA);
  ASSERT_EQ(job.answer.size(), 1u);
  EXPECT_EQ(job.answer[0].rdata, dns::RdataA("10.0.0.1"));

  dns::Response srv = Ask("_http._tcp.web.alice.local.herd", dns::kTypeSrv);
  ASSERT_EQ(srv.answer.size(), 1u);
  EXPECT_EQ(srv.answer[0].rdata, dns::RdataSrv(0, 1, 31000, "0.web.alice.local.herd"));
  ASSERT_EQ(srv.additional.size(), 1u);
  EXPECT_EQ(srv.additional[0].name, "0.web.alice.local.herd");
  EXPECT_EQ(srv.additional[0].rdata, dns::RdataA("10.0.0.1"));

  // A machine known by a host name: a CNAME to it.
  dns::Response cname = Ask("0.v2.api.alice.local.herd", dns::kTypeA);
  ASSERT_EQ(cname.answer.size(), 1u);
  EXPECT_EQ(cname.answer[0].type, dns::kTypeCname);
  EXPECT_EQ(cname.answer[0].rdata, dns::RdataName("node3.example.com"));
}

// A big job's answer stops at kMaxDnsAnswers records instead of being built
// whole and cut by the wire.
TEST_F(NamesTest, ABigJobsAnswerIsBounded) {
  const int n = static_cast<int>(kMaxDnsAnswers) + 200;
  for (int i = 0; i < n; ++i) {
    Apply(testing::Register(
        MachineBuilder("b" + std::to_string(i)).Address("10.1." + std::to_string(i / 250) + "." + std::to_string(i % 250) + ":7071").Build()));
  }
  v1::JobSpec big = JobBuilder("big").Tasks(n).Build();
  big.mutable_task()->add_port_names("http");
  big.mutable_task()->mutable_resources()->set_ports(1);
  Apply(testing::Submit(big));
  for (int i = 0; i < n; ++i) {
    Apply(testing::Schedule("alice/big", i, "b" + std::to_string(i)));
    Report("alice/big", i, 30000 + i, "");
  }
  EXPECT_EQ(Ask("big.alice.local.herd", dns::kTypeA).answer.size(), kMaxDnsAnswers);
  dns::Response srv = Ask("_http._tcp.big.alice.local.herd", dns::kTypeSrv);
  EXPECT_EQ(srv.answer.size(), kMaxDnsAnswers);
  EXPECT_EQ(srv.additional.size(), kMaxDnsAnswers);
}

TEST_F(NamesTest, DnsSaysWhatDoesNotExistAndRefusesOtherZones) {
  for (const char* name : {"nope.alice.local.herd", "7.web.alice.local.herd", "web.alice.other.herd",
                           "_ftp._tcp.web.alice.local.herd", "x.y.z.local.herd"}) {
    dns::Response r = Ask(name, dns::kTypeA);
    EXPECT_EQ(r.rcode, dns::kNxDomain) << name;
    ASSERT_EQ(r.authority.size(), 1u) << name;
    EXPECT_EQ(r.authority[0].type, dns::kTypeSoa) << name;
  }
  // Names that exist, with no records of the type: NOERROR, empty (NODATA).
  for (const char* name :
       {"herd", "local.herd", "alice.local.herd", "2.web.alice.local.herd", "_tcp.web.alice.local.herd"}) {
    dns::Response r = Ask(name, dns::kTypeA);
    EXPECT_EQ(r.rcode, dns::kNoError) << name;
    EXPECT_TRUE(r.answer.empty()) << name;
  }
  EXPECT_EQ(Ask("herd", dns::kTypeSoa).answer.size(), 1u);
  dns::Response refused = Ask("example.com", dns::kTypeA);
  EXPECT_EQ(refused.rcode, dns::kRefused);
  EXPECT_FALSE(refused.authoritative);
  EXPECT_EQ(Ask("web.alice.local.herdx", dns::kTypeA).rcode, dns::kRefused);
}

TEST_F(NamesTest, ATaskThatMovesOrDiesChangesItsAnswer) {
  Apply(testing::Exited(testing::Ref("alice/web", 0, 1), 1));
  EXPECT_TRUE(Ask("0.web.alice.local.herd", dns::kTypeA).answer.empty());
  EXPECT_TRUE(Ask("web.alice.local.herd", dns::kTypeA).answer.empty());
  EXPECT_TRUE(Ask("_http._tcp.web.alice.local.herd", dns::kTypeSrv).answer.empty());
}

}  // namespace
}  // namespace herd::master
