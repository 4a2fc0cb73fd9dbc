// Issue #15: a real Prometheus (Debian's `prometheus`) on loopback scrapes a
// real cell's master and agents over TLS -- the master with a user's
// credential (tls_config cert_file/key_file), one agent with the bearer
// token (authorization credentials_file), one with a certificate -- and its
// query API answers with what the cell holds. Skips, saying so, where the
// prometheus binary is absent (CTest label "prometheus"; scripts/setup.sh
// installs it, so CI runs it).
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/ports.h"
#include "harness/harness.h"
#include "pki/pki.h"

namespace herd {
namespace {

using harness::Cell;
using harness::Child;
using harness::RunResult;
using namespace std::chrono_literals;

constexpr char kToken[] = "prometheus-scrape-token-0123456789";

std::optional<std::string> FindPrometheus() {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "", ':')) {
    const std::string p = absl::StrCat(dir, "/prometheus");
    if (!dir.empty() && access(p.c_str(), X_OK) == 0) return p;
  }
  if (access("/usr/bin/prometheus", X_OK) == 0) return "/usr/bin/prometheus";
  return std::nullopt;
}

// One scrape job over HTTPS: the server's name comes from its certificate
// (pki::ServerName), trust from the cell CA.
std::string ScrapeJob(const std::string& name, const std::string& target, const std::string& server_name,
                      const std::string& ca_file, const std::string& auth) {
  return absl::StrCat("  - job_name: ", name, "\n    scheme: https\n", auth, "    tls_config:\n      ca_file: ",
                      ca_file, "\n      server_name: ", server_name, "\n", "    static_configs:\n      - targets: ['",
                      target, "']\n");
}

class PrometheusTest : public ::testing::Test {
 protected:
  // The value of an instant query's single sample, if it has exactly one.
  std::optional<double> Query(const std::string& promql, std::string* raw) {
    httplib::Client cli("127.0.0.1", prometheus_port_);
    cli.set_connection_timeout(2, 0);
    cli.set_read_timeout(5, 0);
    httplib::Params params{{"query", promql}};
    httplib::Result r = cli.Get("/api/v1/query", params, httplib::Headers{}, httplib::Progress());
    if (!r) {
      *raw = "no answer";
      return std::nullopt;
    }
    *raw = r->body;
    nlohmann::json j = nlohmann::json::parse(r->body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || j.value("status", "") != "success") return std::nullopt;
    const nlohmann::json& result = j["data"]["result"];
    if (!result.is_array() || result.size() != 1) return std::nullopt;
    return std::stod(result[0]["value"][1].get<std::string>());
  }

  // Polls `promql` until `ok` holds for its value (or the deadline).
  bool WaitFor(const std::string& promql, const std::function<bool(double)>& ok, std::string* last,
               harness::Ms timeout = 60s) {
    return harness::Eventually(
        [&] {
          std::optional<double> v = Query(promql, last);
          return v.has_value() && ok(*v);
        },
        timeout);
  }

  int prometheus_port_ = 0;
};

TEST_F(PrometheusTest, ScrapesTheMasterAndAgentsOverTls) {
  std::optional<std::string> prometheus = FindPrometheus();
  if (!prometheus) GTEST_SKIP() << "prometheus not installed (Debian package prometheus; scripts/setup.sh installs it)";

  const int master_metrics = FreePort(), m1_metrics = FreePort(), m2_metrics = FreePort();
  ASSERT_TRUE(master_metrics > 0 && m1_metrics > 0 && m2_metrics > 0);
  ASSERT_TRUE(master_metrics != m1_metrics && m1_metrics != m2_metrics && master_metrics != m2_metrics);
  Cell::Options o;
  // The agents' flags name it before the cell (and its directory) exists.
  const std::string token_file =
      (std::filesystem::temp_directory_path() / absl::StrCat("herd-prometheus-token-", getpid())).string();
  struct Remove {
    std::string path;
    ~Remove() { std::filesystem::remove(path); }
  } remove_token{token_file};
  {
    std::FILE* f = std::fopen(token_file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(kToken, f);
    std::fclose(f);
    chmod(token_file.c_str(), 0600);
  }
  o.master_flags = {"--metrics", absl::StrCat("127.0.0.1:", master_metrics)};
  o.agent_flags["m1"] = {"--metrics", absl::StrCat("127.0.0.1:", m1_metrics), "--metrics-token-file", token_file};
  o.agent_flags["m2"] = {"--metrics", absl::StrCat("127.0.0.1:", m2_metrics)};
  Cell cell(o);
  ASSERT_TRUE(cell.StartMaster().ok()) << cell.LogTails();
  ASSERT_TRUE(cell.StartAgents(2).ok()) << cell.LogTails();

  // Prometheus's credential: a plain user's, one file holding certificate,
  // key and CA, given as both cert_file and key_file (docs/monitoring.md).
  const std::string scraper = cell.UserCredential("prometheus");
  const std::string ca_file = cell.CaDir() + "/ca.crt";
  auto with_cert = [&](const std::string& name, int port, const std::string& server_name) {
    return absl::StrCat("  - job_name: ", name, "\n    scheme: https\n    tls_config:\n      ca_file: ", ca_file,
                        "\n      cert_file: ", scraper, "\n      key_file: ", scraper,
                        "\n      server_name: ", server_name, "\n    static_configs:\n      - targets: ['127.0.0.1:",
                        port, "']\n");
  };
  const std::string config = absl::StrCat(
      "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n",
      with_cert("herd-master", master_metrics, pki::ServerName({pki::Role::kMaster, "master"})),
      ScrapeJob("herd-agent-m1", absl::StrCat("127.0.0.1:", m1_metrics),
                pki::ServerName({pki::Role::kMachine, "m1"}), ca_file,
                absl::StrCat("    authorization:\n      credentials_file: ", token_file, "\n")),
      with_cert("herd-agent-m2", m2_metrics, pki::ServerName({pki::Role::kMachine, "m2"})));
  const std::string config_file = cell.dir().Write("prometheus.yml", config);
  prometheus_port_ = FreePort();
  auto prom = Child::Spawn(
      "prometheus",
      {*prometheus, absl::StrCat("--config.file=", config_file),
       absl::StrCat("--storage.tsdb.path=", cell.dir().Sub("prometheus-data")),
       absl::StrCat("--web.listen-address=127.0.0.1:", prometheus_port_), "--log.level=warn"},
      cell.dir().Sub("logs/prometheus.log"));
  ASSERT_TRUE(prom.ok()) << prom.status();
  auto logs = [&] {
    return absl::StrCat(cell.LogTails(), "\n--- prometheus.log\n", harness::ReadFileOrEmpty((*prom)->log_path()));
  };

  std::string last;
  // Every target is up: TLS, server names and both ways of authenticating work.
  EXPECT_TRUE(WaitFor("count(up == 1)", [](double v) { return v == 3; }, &last)) << last << "\n" << logs();
  EXPECT_TRUE(WaitFor(R"(herd_machines{state="up"})", [](double v) { return v == 2; }, &last))
      << last << "\n" << logs();

  const std::string spec = cell.WriteSpec(
      "hello.yaml",
      "name: hello\nuser: alice\npriority: production\ntasks: 2\n"
      "command: [\"/bin/sh\", \"-c\", \"sleep 3600\"]\nresources: {cpu: 100m, memory: 32Mi}\n");
  RunResult r = cell.Herd({"submit", spec});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  cell.WaitRunning("hello", 2);
  EXPECT_TRUE(WaitFor("sum(herd_task_starts_total)", [](double v) { return v >= 2; }, &last))
      << last << "\n" << logs();
  EXPECT_TRUE(WaitFor("herd_scheduler_placements_total", [](double v) { return v >= 2; }, &last))
      << last << "\n" << logs();
  EXPECT_TRUE(WaitFor("herd_scheduler_pass_duration_seconds_count", [](double v) { return v >= 1; }, &last))
      << last << "\n" << logs();
  EXPECT_TRUE(WaitFor(R"(herd_mutations_committed_total{kind="task_scheduled"})", [](double v) { return v >= 2; },
                      &last))
      << last << "\n" << logs();
  EXPECT_TRUE(WaitFor(R"(sum(herd_tasks_pending))", [](double v) { return v == 0; }, &last))
      << last << "\n" << logs();
  EXPECT_TRUE(WaitFor(R"(herd_poll_duration_seconds_count{shard="0"})", [](double v) { return v > 0; }, &last))
      << last << "\n" << logs();
}

// The master's /metrics asks the master's Authorizer: a user's certificate
// passes, a machine's does not, and nothing passes without one.
TEST(MetricsEndpoint, TheMasterAsksItsAuthorizer) {
  const int port = FreePort();
  Cell::Options o;
  o.master_flags = {"--metrics", absl::StrCat("127.0.0.1:", port)};
  Cell cell(o);
  ASSERT_TRUE(cell.StartMaster().ok()) << cell.LogTails();
  auto status = [&](const std::string& credential) {
    std::unique_ptr<httplib::SSLClient> cli =
        credential.empty() ? std::make_unique<httplib::SSLClient>("127.0.0.1", port)
                           : std::make_unique<httplib::SSLClient>("127.0.0.1", port, credential, credential);
    // The certificate names "master.herd", not the address: trust is not
    // what this test is about (Prometheus checks it above).
    cli->enable_server_certificate_verification(false);
    cli->set_connection_timeout(5, 0);
    httplib::Result r = cli->Get("/metrics");
    return r ? r->status : -1;
  };
  EXPECT_EQ(status(""), 401);
  EXPECT_EQ(status(cell.IssueCredential({pki::Role::kMachine, "m9"}, "m9.pem")), 403);
  EXPECT_EQ(status(cell.UserCredential("bob")), 200);
}

// `--http HOST:0` on the master and the agents: each picks a port, and the
// cell lists where: `herd cell --json` the master's (field http), `herd
// machines --json` each agent's, and each of those serves /metrics.
TEST(MetricsEndpoint, TheCellListsEveryHttpEndpoint) {
  Cell::Options o;
  o.master_flags = {"--http", "127.0.0.1:0"};
  o.agent_flags["m1"] = {"--http", "127.0.0.1:0"};
  o.agent_flags["m2"] = {"--http", "127.0.0.1:0"};
  Cell cell(o);
  ASSERT_TRUE(cell.StartMaster().ok()) << cell.LogTails();
  ASSERT_TRUE(cell.StartAgents(2).ok()) << cell.LogTails();
  auto info = cell.HerdJson<v1::CellInfo>({"cell"});
  ASSERT_TRUE(info.ok()) << info.status();
  std::vector<std::string> endpoints = {info->http()};
  auto machines = cell.Machines();
  ASSERT_TRUE(machines.ok()) << machines.status();
  ASSERT_EQ(machines->machines_size(), 2);
  for (const v1::Machine& m : machines->machines()) endpoints.push_back(m.http());
  for (const std::string& e : endpoints) {
    ASSERT_TRUE(absl::StartsWith(e, "127.0.0.1:") && !absl::EndsWith(e, ":0")) << "'" << e << "'";
    const int port = std::stoi(e.substr(e.rfind(':') + 1));
    const std::string credential = cell.UserCredential("bob");
    httplib::SSLClient cli("127.0.0.1", port, credential, credential);
    cli.enable_server_certificate_verification(false);  // names, not addresses: checked above with Prometheus
    cli.set_connection_timeout(5, 0);
    httplib::Result r = cli.Get("/metrics");
    ASSERT_TRUE(r) << e;
    EXPECT_EQ(r->status, 200) << e;
    EXPECT_TRUE(absl::StrContains(r->body, "# TYPE")) << e;
  }
  EXPECT_NE(endpoints[1], endpoints[2]);
}

}  // namespace
}  // namespace herd
