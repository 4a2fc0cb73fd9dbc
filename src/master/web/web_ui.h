// The master's web UI (`herd master --http HOST:PORT`, on by default in
// `herd up`): server-rendered pages over the same API handlers the gRPC
// service calls, with the caller's identity, so a page shows what the CLI
// shows and nothing the caller may not read.
//
//   /                    the cell (machines, utilisation, revision, masters, alarms) and its jobs
//   /machines            machines with allocation and usage bars
//   /users               users, their quota and what they use of it
//   /pending             the pending queue, highest priority first, with the scheduler's reasons
//   /job/USER/NAME       spec, versions, rollout, tasks (paged), events, why pending
//   /job/USER/NAME/I     a task: state, ports, health, restarts, events, usage charts, log tail
//   /api/logs/USER/NAME/I?stream=stdout|stderr&tail=BYTES   the log tail, text (the page polls it)
//   /login?token=T       asks the browser to confirm (a button), which POSTs the
//                        token back from this origin and gets a session cookie
//   /logout (POST)       ends the session
//
// Who may look: a client certificate of the cell (verified by the TLS
// handshake), or a session cookie from a login link (session.h). Everything
// else gets 401 and a page saying how to log in. Pages only read the cell;
// the two POSTs (login, logout) must come from this origin (Origin header),
// so another site can neither log a browser in as someone else nor out.
// A user has at most kMaxPerUser requests being answered at once.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "master/core/admission/rate_limiter.h"
#include "master/core/master_core.h"
#include "master/web/session.h"
#include "https/https_server.h"
#include "pki/pki.h"
#include "herd/v1/api.pb.h"

namespace herd::master::alerts {
class AlertManager;
}
namespace herd::master::history {
class HistoryDb;
}

namespace herd::master::web {

// Reads the last `tail_bytes` of a task run's stdout or stderr from the agent
// of its machine (`task` as GrantAccess answered it, with `grant`). The
// server supplies it: it holds the agents' channels.
using ReadLogsFn = std::function<absl::StatusOr<std::string>(const v1::GetTaskResponse& task,
                                                             const v1::AccessGrant& grant, bool stderr,
                                                             int64_t tail_bytes)>;

struct WebUiOptions {
  MasterCore* core = nullptr;
  history::HistoryDb* history = nullptr;     // null: no charts (this master keeps no history)
  alerts::AlertManager* alerts = nullptr;    // null: no alarms shown
  RateLimiter* limiter = nullptr;            // the API's per-user rate, shared
  ReadLogsFn read_logs;                      // null: no log tail
  // Fills in what only the server knows (leader, role, store, addresses).
  std::function<void(v1::CellInfo*)> describe;
  Clock* clock = nullptr;
};

class WebUi {
 public:
  static constexpr int kTasksPerPage = 200;
  static constexpr int kMaxLogReads = 16;           // at once
  static constexpr int64_t kMaxTailBytes = 256 << 10;
  static constexpr int kMaxPerUser = 4;             // requests of one user being answered at once

  explicit WebUi(WebUiOptions options);
  ~WebUi();

  // The handler for HttpsServerOptions::pages.
  https::HttpReply Handle(const https::HttpRequest& req);

  WebSessions& sessions() { return sessions_; }

 private:
  WebUiOptions o_;
  WebSessions sessions_;
  std::atomic<int> log_reads_{0};
  absl::Mutex busy_mu_;
  std::map<std::string, int> busy_ ABSL_GUARDED_BY(busy_mu_);  // requests being answered, by user

  https::HttpReply Login(const https::HttpRequest& req);
  https::HttpReply LogOut(const https::HttpRequest& req);
  https::HttpReply Logs(const Principal& who, const std::string& job, int32_t index,
                          const https::HttpRequest& req);
};

// Pieces of the pages, exposed for tests.
std::string HtmlEscape(absl::string_view s);
// An SVG line chart of (time_ms, value) points, labelled with `format`.
std::string SvgChart(const std::vector<std::pair<int64_t, double>>& points, const std::string& title,
                     const std::function<std::string(double)>& format);

}  // namespace herd::master::web
