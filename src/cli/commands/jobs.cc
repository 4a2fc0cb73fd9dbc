// herd jobs, herd tasks JOB, herd machines, herd cell: listings.
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/priority.h"
#include "base/units.h"
#include "cli/commands/commands.h"
#include "cli/render/render.h"

namespace herd::cli {

std::string TaskTable(const google::protobuf::RepeatedPtrField<v1::Task>& tasks, int64_t now) {
  // Health and ports only when some task has them, so plain jobs stay narrow.
  bool extra = false;
  for (const auto& task : tasks) extra = extra || !task.health().empty() || !task.ports().empty();
  // The master's reservation (docs/reclamation.md), where it differs from
  // the limit for some running task.
  bool reserved = false;
  for (const auto& task : tasks) reserved = reserved || (task.state() == v1::Task::RUNNING && task.has_reservation());
  std::vector<std::string> head = {"TASK", "STATE", "PHASE", "MACHINE", "RESTARTS", "AGE"};
  if (reserved) head.push_back("RESERVED");
  if (extra) head.insert(head.end(), {"HEALTH", "PORTS"});
  head.push_back("LAST EVENT");
  Table t(head);
  for (const auto& task : tasks) {
    std::string ev = TransitionName(task.last_event().transition());
    if (!task.last_event().reason().empty()) absl::StrAppend(&ev, ": ", task.last_event().reason());
    std::vector<std::string> row = {absl::StrCat(task.job(), "/", task.index()), StateName(task.state()),
                                    PhaseName(task.phase()),
                                    task.state() == v1::Task::RUNNING ? task.machine() : "-",
                                    absl::StrCat(task.restarts()), Age(task.last_event().time_ms(), now)};
    if (reserved) {
      row.push_back(task.state() != v1::Task::RUNNING ? "-"
                    : task.has_reservation()
                        ? absl::StrCat(FormatCpu(task.reservation().cpu_millis()), " cpu, ",
                                       FormatBytes(task.reservation().memory_bytes()))
                        : "limit");
    }
    if (extra) {
      std::map<std::string, int32_t> ports(task.ports().begin(), task.ports().end());  // sorted
      std::vector<std::string> p;
      for (const auto& [name, port] : ports) p.push_back(absl::StrCat(name, "=", port));
      row.push_back(task.health().empty() ? "-" : task.health());
      row.push_back(p.empty() ? "-" : absl::StrJoin(p, ","));
    }
    row.push_back(ev);
    t.Add(row);
  }
  return t.ToString();
}

void AddJobs(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand("jobs", "List jobs");
  auto user = std::make_shared<std::string>();
  auto all = std::make_shared<bool>(false);
  auto rev = std::make_shared<int64_t>(0);
  cmd->add_option("--owner", *user, "Only this user's jobs");
  cmd->add_flag("-a,--all", *all, "Include dead jobs");
  cmd->add_option("--at-revision", *rev, "The cell as of this revision");
  cmd->add_flag("--json", ctx.flags.json, "Print the ListJobsResponse as JSON");
  cmd->callback([&ctx, user, all, rev] {
    Client client(ctx.flags);
    v1::ListJobsRequest req;
    req.set_user(*user);
    req.set_include_dead(*all);
    req.set_at_revision(*rev);
    v1::ListJobsResponse resp;
    if (!CallMaster(ctx, client, &v1::Herd::Stub::ListJobs, req, &resp)) return;
    int64_t now = NowMs();
    Table t({"JOB", "VERSION", "PRIORITY", "STATE", "RUNNING", "PENDING", "DEAD", "AGE"});
    for (const auto& j : resp.jobs()) {
      t.Add({j.id(), absl::StrCat(j.version()),
             absl::StrCat(j.spec().priority(), " (", BandNameOf(j.spec().priority()), ")"),
             v1::Job::State_Name(j.state()), absl::StrCat(j.running()), absl::StrCat(j.pending()),
             absl::StrCat(j.dead()), Age(j.submit_time_ms(), now)});
    }
    if (t.size() == 0) {
      std::printf("no jobs%s\n", *all ? "" : " (herd jobs --all includes dead ones)");
    } else {
      std::printf("%s", t.ToString().c_str());
    }
  });
}

void AddTasks(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand("tasks", "List a job's tasks: state, machine, last transition");
  auto job = std::make_shared<std::string>();
  auto rev = std::make_shared<int64_t>(0);
  cmd->add_option("job", *job, "JOB or USER/JOB")->required();
  cmd->add_option("--at-revision", *rev, "The job as of this revision");
  cmd->add_flag("--json", ctx.flags.json, "Print the ListTasksResponse as JSON");
  cmd->callback([&ctx, job, rev] {
    Client client(ctx.flags);
    v1::ListTasksRequest req;
    req.set_job(*job);
    req.set_at_revision(*rev);
    v1::ListTasksResponse resp;
    if (!CallMaster(ctx, client, &v1::Herd::Stub::ListTasks, req, &resp)) return;
    std::printf("%s", TaskTable(resp.tasks(), NowMs()).c_str());
  });
}

void AddMachines(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand("machines", "List the cell's machines");
  auto rev = std::make_shared<int64_t>(0);
  cmd->add_option("--at-revision", *rev, "The cell as of this revision");
  cmd->add_flag("--json", ctx.flags.json, "Print the ListMachinesResponse as JSON");
  cmd->callback([&ctx, rev] {
    Client client(ctx.flags);
    v1::ListMachinesRequest req;
    req.set_at_revision(*rev);
    v1::ListMachinesResponse resp;
    if (!CallMaster(ctx, client, &v1::Herd::Stub::ListMachines, req, &resp)) return;
    Table t({"MACHINE", "STATE", "ADDRESS", "CPU", "MEMORY", "TASKS", "ATTRIBUTES"});
    for (const auto& m : resp.machines()) {
      std::vector<std::string> attrs;
      std::vector<std::pair<std::string, std::string>> sorted(m.attributes().begin(), m.attributes().end());
      std::sort(sorted.begin(), sorted.end());
      for (const auto& [k, v] : sorted) {
        if (k != "hostname" && k != "os") attrs.push_back(absl::StrCat(k, "=", v));
      }
      std::string state = v1::Machine::State_Name(m.state());
      if (m.state() == v1::Machine::DOWN && !m.reason().empty()) absl::StrAppend(&state, " (", m.reason(), ")");
      if (m.drained()) {
        absl::StrAppend(&state, ", DRAINED", m.drain_reason().empty() ? "" : absl::StrCat(" (", m.drain_reason(), ")"));
      }
      if (!m.interference().empty()) {
        // e.g. "UP, INTERFERENCE mark (run web.0.3 waited for a CPU 31% of the time)"
        absl::StrAppend(&state, ", INTERFERENCE ", m.interference(),
                        m.interference_reason().empty() ? "" : absl::StrCat(" (", m.interference_reason(), ")"));
      }
      t.Add({m.name(), state, m.address(),
             absl::StrCat(FormatCpu(m.allocated().cpu_millis()), "/", FormatCpu(m.capacity().cpu_millis())),
             absl::StrCat(FormatBytes(m.allocated().memory_bytes()), "/", FormatBytes(m.capacity().memory_bytes())),
             absl::StrCat(m.task_count()), absl::StrJoin(attrs, ",")});
    }
    if (t.size() == 0) {
      std::printf("no machines yet (start agents with 'herd agent --master %s')\n", client.master().c_str());
    } else {
      std::printf("%s", t.ToString().c_str());
    }
  });
}

// herd drain / herd undrain MACHINE...
void AddDrain(CLI::App& app, CommandContext& ctx) {
  for (bool undrain : {false, true}) {
    auto* cmd = app.add_subcommand(
        undrain ? "undrain" : "drain",
        undrain ? "Put drained machines back in service"
                : "Take machines out of service: nothing new is placed there, and their tasks are moved off "
                  "within their jobs' disruption budgets (admins)");
    auto machines = std::make_shared<std::vector<std::string>>();
    auto reason = std::make_shared<std::string>();
    cmd->add_option("machine", *machines, "Machine names")->required();
    if (!undrain) cmd->add_option("--reason", *reason, "Why (shown by herd machines)");
    cmd->callback([&ctx, machines, reason, undrain] {
      Client client(ctx.flags);
      v1::DrainMachinesRequest req;
      for (const auto& m : *machines) req.add_machines(m);
      req.set_undrain(undrain);
      req.set_reason(*reason);
      v1::DrainMachinesResponse resp;
      if (!CallMaster(ctx, client, &v1::Herd::Stub::DrainMachines, req, &resp)) return;
      if (resp.changed().empty()) {
        std::printf("nothing to change: %s already %s\n", absl::StrJoin(*machines, ", ").c_str(),
                    undrain ? "in service" : "drained");
      } else {
        std::printf("%s %s (revision %lld)%s\n", undrain ? "undrained" : "drained",
                    absl::StrJoin(resp.changed(), ", ").c_str(), static_cast<long long>(resp.revision()),
                    undrain ? "" : "; their tasks move off within their jobs' disruption budgets");
      }
    });
  }
}

void AddCell(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand("cell", "Show the cell: revision, machines, jobs and tasks");
  cmd->add_flag("--json", ctx.flags.json, "Print the CellInfo as JSON");
  cmd->callback([&ctx] {
    Client client(ctx.flags);
    v1::CellInfo info;
    if (!CallMaster(ctx, client, &v1::Herd::Stub::GetCell, v1::GetCellRequest(), &info)) return;
    std::printf("cell %s at %s, revision %lld (durable %lld), up %s\n", info.cell().c_str(), client.master().c_str(),
                static_cast<long long>(info.revision()), static_cast<long long>(info.durable_revision()),
                Age(info.started_ms(), NowMs()).c_str());
    if (!info.leader().empty() || info.role() == "follower") {
      std::printf("leader: %s (store %s)\n", info.leader().empty() ? "none (an election is under way)" : info.leader().c_str(),
                  info.store().c_str());
    }
    if (info.role() == "follower") {
      std::printf("answered by: %s, a follower (reads come from its copy at the revision above; changes go to "
                  "the leader)\n",
                  info.replica().c_str());
    }
    std::printf("machines: %d (%d up)\njobs: %d live\ntasks: %d running, %d pending, %d dead\n", info.machines(),
                info.machines_up(), info.jobs(), info.tasks_running(), info.tasks_pending(), info.tasks_dead());
    if (!info.dns().empty()) std::printf("dns: %s (tasks' names, see herd resolve)\n", info.dns().c_str());
  });
}

}  // namespace herd::cli
