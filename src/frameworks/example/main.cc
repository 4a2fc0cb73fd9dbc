// herd-example-framework: a small batch framework on the Framework API
// (issue #17, docs/frameworks.md), written as a separate process the way a
// Mesos-model framework is: it subscribes, accepts offers with tasks,
// acknowledges every status update, retries failed tasks, and re-subscribes
// with its id if its stream breaks.
//
//   herd-example-framework --master ADDR [--credentials FILE] --tasks N
//       [--cpu 100m] [--memory 64Mi] [--retries 3] [--name NAME]
//       [--role ROLE] [--per-offer K] [--timeout 10m] [--stats]
//       -- CMD [ARGS...]
//
// It takes every task that fits from an offer, or at most K with
// --per-offer (the rest goes back at once, to be offered again: a framework
// that shares the cell fairly under DRF takes little from each offer).
//
// With --stats it prints, at the end, RESULT lines: offer_to_running_p50_ms
// and _p99_ms (from the offer arriving here to the first update saying the
// task runs -- or already finished -- on its agent, per task), and
// tasks_per_second (tasks finished over the time from the first offer to
// the last finish).
//
// --master may be a list (HOST:PORT,HOST:PORT,...) of replicated masters:
// it talks to the one that leads, and follows a failover.
//
// Runs N copies of CMD; exits 0 when all N finished with exit code 0, 1 when
// one failed more than --retries times (or the timeout passed), 2 on bad
// usage. The credential is found as the herd CLI finds it (--credentials,
// HERD_CREDENTIALS, else the admin credential `herd up` wrote).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/units.h"
#include "cli/client.h"
#include "herd/v1/frameworks.grpc.pb.h"
#include "pki/pki.h"
#include "rpc/rpc.h"

namespace {

struct Flags {
  std::string master;
  std::string credentials;
  std::string name = "example";
  std::string role;
  int per_offer = 0;  // 0: as many as fit
  int tasks = 0;
  int64_t cpu_millis = 100;
  int64_t memory_bytes = 64ll << 20;
  int retries = 3;
  int64_t timeout_ms = 600'000;
  bool stats = false;
  std::vector<std::string> command;
};

double NowMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "herd-example-framework: %s\n"
               "usage: herd-example-framework --master ADDR [--credentials FILE] --tasks N [--cpu 100m] "
               "[--memory 64Mi] [--retries 3] [--name NAME] [--role ROLE] [--per-offer K] [--timeout 10m] "
               "[--stats] -- CMD [ARGS...]\n",
               why.c_str());
  return 2;
}

// Each of the N tasks: its attempts so far and whether it is done.
struct Slot {
  int attempts = 0;
  bool running = false;  // an attempt is launched and has not ended
  bool finished = false;
  double offer_ms = -1;     // when the offer its current attempt went out on arrived
  double launched_ms = -1;  // when an update first said that attempt ran
};

class Framework {
 public:
  // One channel per master of the list: the framework talks to one at a
  // time, and moves to the next when that one does not lead (a follower
  // answers UNAVAILABLE) or cannot be reached, as a Mesos framework looks
  // for the leading master.
  Framework(Flags flags, std::vector<std::shared_ptr<grpc::Channel>> channels)
      : flags_(std::move(flags)), slots_(flags_.tasks) {
    for (auto& c : channels) stubs_.push_back(herd::v1::Frameworks::NewStub(c));
  }

  int Run() {
    const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(flags_.timeout_ms);
    int broken = 0;
    while (std::chrono::system_clock::now() < deadline) {
      auto ctx = herd::rpc::Context("", 0);
      ctx->set_deadline(deadline);
      herd::v1::SubscribeRequest req;
      req.mutable_framework()->set_id(id_);
      req.mutable_framework()->set_name(flags_.name);
      req.mutable_framework()->set_role(flags_.role);
      auto stream = Stub().Subscribe(ctx.get(), req);
      herd::v1::FrameworkEvent e;
      while (stream->Read(&e)) {
        broken = 0;
        Handle(e);
        if (outcome_ >= 0) {
          Teardown();
          ctx->TryCancel();
          stream->Finish();
          if (flags_.stats) PrintStats();
          return outcome_;
        }
      }
      grpc::Status st = stream->Finish();
      if (st.error_code() == grpc::StatusCode::UNAVAILABLE) Rotate();
      if (++broken > 30) {
        std::fprintf(stderr, "herd-example-framework: the stream keeps failing: %s\n", st.error_message().c_str());
        return 1;
      }
      std::fprintf(stderr, "herd-example-framework: stream ended (%s); subscribing again\n",
                   st.error_message().c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // back off before reconnecting
    }
    std::fprintf(stderr, "herd-example-framework: timed out with %d of %d tasks finished\n", Finished(),
                 flags_.tasks);
    Teardown();
    return 1;
  }

 private:
  int Finished() const {
    int n = 0;
    for (const Slot& s : slots_) n += s.finished;
    return n;
  }

  void Handle(const herd::v1::FrameworkEvent& e) {
    if (e.has_subscribed()) {
      id_ = e.subscribed().framework_id();
      std::fprintf(stderr, "herd-example-framework: subscribed as framework %s\n", id_.c_str());
      Reconcile();
    } else if (e.has_offers()) {
      for (const auto& o : e.offers().offers()) Offer(o);
    } else if (e.has_update()) {
      Update(e.update().status());
    } else if (e.has_error()) {
      std::fprintf(stderr, "herd-example-framework: error from the master: %s\n", e.error().message().c_str());
    }
  }

  // After (re-)subscribing: what became of the tasks launched before.
  void Reconcile() {
    herd::v1::ReconcileRequest req;
    req.set_framework_id(id_);
    herd::v1::ReconcileResponse resp;
    auto ctx = herd::rpc::Context("", 15'000);
    if (grpc::Status st = Stub().Reconcile(ctx.get(), req, &resp); !st.ok()) return;
    for (const auto& s : resp.statuses()) Update(s);
  }

  void Offer(const herd::v1::ResourceOffer& o) {
    const double arrived = NowMs();
    if (first_offer_ms_ < 0) first_offer_ms_ = arrived;
    herd::v1::AcceptRequest req;
    req.set_framework_id(id_);
    req.add_offer_ids(o.id());
    int64_t cpu = o.resources().cpu_millis(), mem = o.resources().memory_bytes();
    for (size_t i = 0; i < slots_.size(); ++i) {
      Slot& s = slots_[i];
      if (s.finished || s.running) continue;
      if (cpu < flags_.cpu_millis || mem < flags_.memory_bytes) break;
      if (flags_.per_offer > 0 && req.tasks_size() >= flags_.per_offer) break;
      cpu -= flags_.cpu_millis;
      mem -= flags_.memory_bytes;
      herd::v1::FrameworkTask* t = req.add_tasks();
      t->set_task_id(absl::StrCat("t", i, "-", s.attempts));
      for (const std::string& a : flags_.command) t->add_argv(a);
      t->mutable_resources()->set_cpu_millis(flags_.cpu_millis);
      t->mutable_resources()->set_memory_bytes(flags_.memory_bytes);
      s.running = true;
      ++s.attempts;
      s.offer_ms = arrived;
      s.launched_ms = -1;
    }
    auto ctx = herd::rpc::Context("", 15'000);
    if (req.tasks().empty()) {
      herd::v1::DeclineRequest d;
      d.set_framework_id(id_);
      d.add_offer_ids(o.id());
      d.mutable_filters()->set_refuse_ms(5'000);
      herd::v1::DeclineResponse resp;
      Stub().Decline(ctx.get(), d, &resp);
      return;
    }
    herd::v1::AcceptResponse resp;
    if (grpc::Status st = Stub().Accept(ctx.get(), req, &resp); !st.ok()) {
      std::fprintf(stderr, "herd-example-framework: accept: %s\n", st.error_message().c_str());
      for (const auto& t : req.tasks()) Ended(t.task_id(), false, st.error_message());
      return;
    }
    // Refusals before the commit come only in the answer (no update).
    for (const auto& s : resp.statuses()) {
      if (s.state() == herd::v1::TASK_ERROR && s.uuid().empty()) Update(s);
    }
  }

  void Update(const herd::v1::FrameworkTaskStatus& s) {
    if (!s.uuid().empty()) {
      herd::v1::AcknowledgeRequest ack;
      ack.set_framework_id(id_);
      ack.set_task_id(s.task_id());
      ack.set_uuid(s.uuid());
      herd::v1::AcknowledgeResponse resp;
      auto ctx = herd::rpc::Context("", 15'000);
      Stub().Acknowledge(ctx.get(), ack, &resp);  // lost: the update comes again
    }
    if (s.state() == herd::v1::TASK_RUNNING || s.state() == herd::v1::TASK_FINISHED) Launched(s.task_id());
    switch (s.state()) {
      case herd::v1::TASK_FINISHED:
        Ended(s.task_id(), true, "");
        break;
      case herd::v1::TASK_FAILED:
      case herd::v1::TASK_KILLED:
      case herd::v1::TASK_LOST:
      case herd::v1::TASK_ERROR:
        Ended(s.task_id(), false,
              absl::StrCat(herd::v1::FrameworkTaskState_Name(s.state()), " exit ", s.exit_code(), ": ", s.message()));
        break;
      default:
        break;
    }
  }

  // The slot of task_id's current attempt, or nullptr (an old attempt).
  Slot* Current(const std::string& task_id) {
    size_t slot = 0;
    int attempt = 0;
    if (std::sscanf(task_id.c_str(), "t%zu-%d", &slot, &attempt) != 2 || slot >= slots_.size()) return nullptr;
    Slot& s = slots_[slot];
    return attempt == s.attempts - 1 ? &s : nullptr;
  }

  void Launched(const std::string& task_id) {
    Slot* s = Current(task_id);
    if (s == nullptr || s->launched_ms >= 0 || s->offer_ms < 0) return;
    s->launched_ms = NowMs();
    launch_ms_.push_back(s->launched_ms - s->offer_ms);
  }

  void PrintStats() {
    std::sort(launch_ms_.begin(), launch_ms_.end());
    auto pct = [this](double p) {
      if (launch_ms_.empty()) return 0.0;
      size_t i = static_cast<size_t>(p * static_cast<double>(launch_ms_.size() - 1) + 0.5);
      return launch_ms_[std::min(i, launch_ms_.size() - 1)];
    };
    const double span_s = (last_finish_ms_ - first_offer_ms_) / 1000;
    std::printf("RESULT offer_to_running_p50_ms=%.1f\n", pct(0.5));
    std::printf("RESULT offer_to_running_p99_ms=%.1f\n", pct(0.99));
    std::printf("RESULT tasks_per_second=%.1f\n", span_s > 0 ? Finished() / span_s : 0.0);
    std::printf("RESULT tasks=%d\n", Finished());
    std::fflush(stdout);
  }

  // Task ids are "t<slot>-<attempt>": only the slot's current attempt counts.
  void Ended(const std::string& task_id, bool ok, const std::string& why) {
    size_t slot = 0;
    int attempt = 0;
    if (std::sscanf(task_id.c_str(), "t%zu-%d", &slot, &attempt) != 2 || slot >= slots_.size()) return;
    Slot& s = slots_[slot];
    if (s.finished || !s.running || attempt != s.attempts - 1) return;  // an old attempt, or a repeat
    s.running = false;
    if (ok) {
      s.finished = true;
      last_finish_ms_ = NowMs();
      std::fprintf(stderr, "herd-example-framework: %s finished (%d/%d)\n", task_id.c_str(), Finished(),
                   flags_.tasks);
      if (Finished() == flags_.tasks) outcome_ = 0;
      return;
    }
    std::fprintf(stderr, "herd-example-framework: %s did not succeed: %s\n", task_id.c_str(), why.c_str());
    if (s.attempts > flags_.retries) {
      std::fprintf(stderr, "herd-example-framework: task %zu failed %d times; giving up\n", slot, s.attempts);
      outcome_ = 1;
    }
  }

  void Teardown() {
    if (id_.empty()) return;
    herd::v1::TeardownRequest req;
    req.set_framework_id(id_);
    herd::v1::TeardownResponse resp;
    auto ctx = herd::rpc::Context("", 15'000);
    Stub().Teardown(ctx.get(), req, &resp);
  }

  const Flags flags_;
  herd::v1::Frameworks::Stub& Stub() { return *stubs_[current_]; }
  void Rotate() { current_ = (current_ + 1) % stubs_.size(); }

  std::vector<std::unique_ptr<herd::v1::Frameworks::Stub>> stubs_;
  size_t current_ = 0;
  std::vector<Slot> slots_;
  std::string id_;
  int outcome_ = -1;  // exit code once decided
  double first_offer_ms_ = -1, last_finish_ms_ = -1;
  std::vector<double> launch_ms_;  // offer -> launched, per attempt
};

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  int i = 1;
  auto value = [&](const char* name) -> const char* {
    if (i + 1 >= argc) {
      Usage(absl::StrCat(name, " needs a value"));
      std::exit(2);
    }
    return argv[++i];
  };
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      for (++i; i < argc; ++i) f.command.push_back(argv[i]);
      break;
    } else if (a == "--master") {
      f.master = value("--master");
    } else if (a == "--credentials") {
      f.credentials = value("--credentials");
    } else if (a == "--name") {
      f.name = value("--name");
    } else if (a == "--role") {
      f.role = value("--role");
    } else if (a == "--per-offer") {
      f.per_offer = std::atoi(value("--per-offer"));
      if (f.per_offer < 1) return Usage("--per-offer must be at least 1");
    } else if (a == "--tasks") {
      f.tasks = std::atoi(value("--tasks"));
    } else if (a == "--retries") {
      f.retries = std::atoi(value("--retries"));
    } else if (a == "--cpu") {
      auto v = herd::ParseCpuMillis(value("--cpu"));
      if (!v.ok()) return Usage(std::string(v.status().message()));
      f.cpu_millis = *v;
    } else if (a == "--memory") {
      auto v = herd::ParseBytes(value("--memory"));
      if (!v.ok()) return Usage(std::string(v.status().message()));
      f.memory_bytes = *v;
    } else if (a == "--stats") {
      f.stats = true;
    } else if (a == "--timeout") {
      auto v = herd::ParseDurationMs(value("--timeout"));
      if (!v.ok()) return Usage(std::string(v.status().message()));
      f.timeout_ms = *v;
    } else {
      return Usage(absl::StrCat("unknown argument '", a, "'"));
    }
  }
  if (f.tasks < 1 || f.tasks > 100'000) return Usage("--tasks must be 1..100000");
  if (f.retries < 0) return Usage("--retries must not be negative");
  if (f.command.empty()) return Usage("no command: put it after --");
  if (f.master.empty()) {
    const char* env = std::getenv("HERD_MASTER");
    f.master = env && *env ? env : herd::cli::kDefaultMaster;
  }
  const std::string cred_path = f.credentials.empty() ? herd::cli::DefaultCredentialsPath() : f.credentials;
  auto cred = herd::pki::LoadCredential(cred_path);
  if (!cred.ok()) {
    std::fprintf(stderr, "herd-example-framework: %s (name one with --credentials or HERD_CREDENTIALS)\n",
                 cred.status().ToString().c_str());
    return 2;
  }
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (absl::string_view addr : absl::StrSplit(f.master, ',', absl::SkipEmpty())) {
    channels.push_back(herd::rpc::Channel(std::string(addr), *cred, herd::rpc::MasterIdentity()));
  }
  if (channels.empty() || channels.size() > 16) return Usage("--master: one to 16 addresses, comma-separated");
  Framework fw(f, std::move(channels));
  return fw.Run();
}
