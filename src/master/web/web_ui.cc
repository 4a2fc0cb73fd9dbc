#include "master/web/web_ui.h"

#include <algorithm>
#include <map>
#include <vector>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/log.h"
#include "base/priority.h"
#include "base/units.h"
#include "master/alerts/alert_manager.h"
#include "master/core/admission/identity.h"
#include "master/history/history_db.h"
#include "master/web/assets.h"

namespace herd::master::web {

namespace {

using https::HttpReply;
using https::HttpRequest;

std::string Time(int64_t ms) {
  if (ms <= 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixMillis(ms), absl::UTCTimeZone());
}

std::string Ago(int64_t ms, int64_t now_ms) {
  if (ms <= 0) return "-";
  return absl::StrCat(FormatDurationMs(std::max<int64_t>(0, (now_ms - ms) / 1000 * 1000)), " ago");
}

// A path component of a link (job and user names are restricted to safe
// characters; escaped all the same).
std::string Url(absl::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

std::string JobUrl(absl::string_view id) {
  const size_t slash = id.find('/');
  if (slash == absl::string_view::npos) return "/";
  return absl::StrCat("/job/", Url(id.substr(0, slash)), "/", Url(id.substr(slash + 1)));
}

std::string TaskUrl(absl::string_view id, int32_t index) { return absl::StrCat(JobUrl(id), "/", index); }

std::string Link(const std::string& href, absl::string_view text) {
  return absl::StrCat("<a href=\"", HtmlEscape(href), "\">", HtmlEscape(text), "</a>");
}

// A horizontal bar: `used` of `total` (and, if given, `usage` of it as a
// second, darker bar), as inline SVG (the page's CSP allows no inline style).
std::string Bar(double used, double total, double usage = -1) {
  const double u = total > 0 ? std::clamp(used / total, 0.0, 1.0) * 100 : 0;
  std::string out = absl::StrCat("<svg class=\"bar\" viewBox=\"0 0 100 10\" preserveAspectRatio=\"none\" role=\"img\">",
                                 "<rect class=\"bar-bg\" width=\"100\" height=\"10\"/>",
                                 "<rect class=\"bar-alloc\" width=\"", absl::StrFormat("%.1f", u), "\" height=\"10\"/>");
  if (usage >= 0) {
    const double g = total > 0 ? std::clamp(usage / total, 0.0, 1.0) * 100 : 0;
    absl::StrAppend(&out, "<rect class=\"bar-use\" y=\"3\" width=\"", absl::StrFormat("%.1f", g), "\" height=\"4\"/>");
  }
  absl::StrAppend(&out, "</svg>");
  return out;
}

std::string Pct(double a, double b) { return b > 0 ? absl::StrFormat("%.0f%%", 100.0 * a / b) : "-"; }

std::string Resources(const v1::Resources& r) {
  std::vector<std::string> parts = {absl::StrCat("cpu ", FormatCpu(r.cpu_millis())),
                                    absl::StrCat("mem ", FormatBytes(r.memory_bytes()))};
  if (r.disk_bytes() > 0) parts.push_back(absl::StrCat("disk ", FormatBytes(r.disk_bytes())));
  if (r.ports() > 0) parts.push_back(absl::StrCat("ports ", r.ports()));
  std::map<std::string, int64_t> ext(r.extended().begin(), r.extended().end());
  for (const auto& [k, v] : ext) parts.push_back(absl::StrCat(k, " ", v));
  return HtmlEscape(absl::StrJoin(parts, ", "));
}

std::string StateClass(absl::string_view state) { return absl::StrCat("st st-", absl::AsciiStrToLower(state)); }

std::string TaskState(const v1::Task& t) {
  std::string s = v1::Task::State_Name(t.state());
  if (t.state() == v1::Task::RUNNING && t.phase() != v1::Task::PHASE_UNSPECIFIED) {
    absl::StrAppend(&s, "/", v1::Task::Phase_Name(t.phase()));
  }
  return s;
}

std::string EventText(const v1::Event& e) {
  std::string s = v1::Event::Transition_Name(e.transition());
  if (!e.reason().empty()) absl::StrAppend(&s, ": ", e.reason());
  if (!e.machine().empty()) absl::StrAppend(&s, " (", e.machine(), ")");
  return s;
}

std::string Page(absl::string_view title, absl::string_view active, const Principal& who, const std::string& cell,
                 const std::string& body) {
  std::string nav;
  for (auto [href, name] : std::vector<std::pair<std::string, std::string>>{
           {"/", "Cell"}, {"/machines", "Machines"}, {"/users", "Users"}, {"/pending", "Pending"}}) {
    absl::StrAppend(&nav, "<a href=\"", href, "\"", name == active ? " class=\"active\"" : "", ">", name, "</a>");
  }
  return absl::StrCat(
      "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<link rel=\"icon\" href=\"data:,\"><link rel=\"stylesheet\" href=\"/static/ui.css\">"
      "<script src=\"/static/ui.js\" defer></script><title>",
      HtmlEscape(title), " · herd ", HtmlEscape(cell), "</title></head><body><header><span class=\"brand\">herd</span>",
      "<span class=\"cell\">cell ", HtmlEscape(cell), "</span><nav>", nav, "</nav><span class=\"who\">",
      HtmlEscape(who.acting_user.empty() ? who.name : absl::StrCat(who.acting_user, " as ", who.name)),
      "</span><form method=\"post\" action=\"/logout\" class=\"logout\"><button type=\"submit\">Log out</button>"
      "</form></header><main><h1>", HtmlEscape(title), "</h1>", body, "</main></body></html>");
}

HttpReply Html(std::string body, int status = 200) {
  HttpReply r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

int HttpStatus(const absl::Status& st) {
  switch (st.code()) {
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kInvalidArgument:
      return 400;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    default:
      return 503;
  }
}

HttpReply ErrorPage(const absl::Status& st) {
  const int code = HttpStatus(st);
  std::string help;
  if (code == 401) {
    help =
        "<p>Run <code>herd ui</code> on a machine where the herd command line works: it prints a link that logs this "
        "browser in as you (valid for 10 minutes, once).</p>";
  }
  return Html(absl::StrCat("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><link rel=\"icon\" "
                           "href=\"data:,\"><link rel=\"stylesheet\" href=\"/static/ui.css\"><title>herd: ",
                           code, "</title></head><body><main><h1>", code, "</h1><p class=\"error\">",
                           HtmlEscape(st.message()), "</p>", help, "</main></body></html>"),
              code);
}

// A SQL string literal (the history query takes one statement; the values
// here are job names the API already validated, quoted all the same).
std::string Sql(absl::string_view s) {
  std::string out = "'";
  for (char c : s) {
    out.push_back(c);
    if (c == '\'') out.push_back('\'');
  }
  out.push_back('\'');
  return out;
}

double Num(const v1::QueryValue& v) {
  if (v.has_integer()) return static_cast<double>(v.integer());
  if (v.has_real()) return v.real();
  return 0;
}
std::string Str(const v1::QueryValue& v) {
  if (v.has_text()) return v.text();
  if (v.has_integer()) return absl::StrCat(v.integer());
  if (v.has_real()) return absl::StrCat(v.real());
  return "";
}

absl::StatusOr<v1::QueryHistoryResponse> Query(history::HistoryDb* db, const std::string& sql, int32_t rows = 2000) {
  if (db == nullptr) return absl::UnavailableError("this master keeps no history (the leader does)");
  history::QueryLimits limits;
  limits.max_rows = rows;
  limits.max_bytes = 4 << 20;
  limits.timeout = absl::Seconds(3);
  return db->Query(sql, limits);
}

// job "alice/web" -> {"alice", "web"}; from path parts.
std::string JobId(absl::string_view user, absl::string_view name) { return absl::StrCat(user, "/", name); }

}  // namespace

std::string HtmlEscape(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string SvgChart(const std::vector<std::pair<int64_t, double>>& points, const std::string& title,
                     const std::function<std::string(double)>& format) {
  constexpr double kW = 600, kH = 120, kLeft = 70, kBottom = 18;
  std::string out = absl::StrCat("<figure class=\"chart\"><figcaption>", HtmlEscape(title), "</figcaption>");
  if (points.empty()) {
    absl::StrAppend(&out, "<p class=\"muted\">no samples yet</p></figure>");
    return out;
  }
  const int64_t t0 = points.front().first, t1 = std::max(points.back().first, t0 + 1);
  double vmax = 0;
  for (const auto& p : points) vmax = std::max(vmax, p.second);
  if (vmax <= 0) vmax = 1;
  std::string line;
  for (const auto& [t, v] : points) {
    const double x = kLeft + (kW - kLeft - 4) * static_cast<double>(t - t0) / static_cast<double>(t1 - t0);
    const double y = (kH - kBottom) - (kH - kBottom - 6) * v / vmax;
    absl::StrAppend(&line, line.empty() ? "" : " ", absl::StrFormat("%.1f,%.1f", x, y));
  }
  absl::StrAppend(&out, "<svg viewBox=\"0 0 ", kW, " ", kH, "\" role=\"img\" aria-label=\"", HtmlEscape(title),
                  "\"><line class=\"axis\" x1=\"", kLeft, "\" y1=\"", kH - kBottom, "\" x2=\"", kW, "\" y2=\"",
                  kH - kBottom, "\"/><text x=\"", kLeft - 4, "\" y=\"12\" text-anchor=\"end\">", HtmlEscape(format(vmax)),
                  "</text><text x=\"", kLeft - 4, "\" y=\"", kH - kBottom, "\" text-anchor=\"end\">0</text><text x=\"",
                  kLeft, "\" y=\"", kH - 3, "\">", HtmlEscape(Time(t0)), "</text><text x=\"", kW - 2, "\" y=\"",
                  kH - 3, "\" text-anchor=\"end\">", HtmlEscape(Time(t1)), "</text>");
  if (points.size() == 1) {
    const auto [x, y] = std::pair<double, double>(kLeft, (kH - kBottom) - (kH - kBottom - 6));
    absl::StrAppend(&out, "<circle class=\"series\" cx=\"", x, "\" cy=\"", y, "\" r=\"3\"/>");
  } else {
    absl::StrAppend(&out, "<polyline class=\"series\" points=\"", line, "\"/>");
  }
  absl::StrAppend(&out, "</svg></figure>");
  return out;
}

WebUi::WebUi(WebUiOptions options) : o_(std::move(options)) {
  if (o_.clock == nullptr) o_.clock = RealClock::Get();
}
WebUi::~WebUi() = default;

namespace {

// A POST's form field (application/x-www-form-urlencoded; tokens need no
// decoding: they are base64url and '.').
std::string FormField(const std::string& body, absl::string_view key) {
  for (absl::string_view kv : absl::StrSplit(body, '&')) {
    if (absl::ConsumePrefix(&kv, key) && absl::ConsumePrefix(&kv, "=")) return std::string(kv);
  }
  return "";
}

// A POST from a page of this server: browsers send Origin on every POST,
// and another site's cannot claim ours.
absl::Status SameOrigin(const HttpRequest& req) {
  if (req.origin.empty() || req.origin != absl::StrCat("https://", req.host)) {
    return absl::PermissionDeniedError(
        absl::StrCat("a request from another site (Origin '", req.origin, "') may not do this"));
  }
  return absl::OkStatus();
}

std::string SmallPage(absl::string_view title, const std::string& body) {
  return absl::StrCat("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><link rel=\"icon\" "
                      "href=\"data:,\"><link rel=\"stylesheet\" href=\"/static/ui.css\"><title>",
                      HtmlEscape(title), "</title></head><body><main>", body, "</main></body></html>");
}

}  // namespace

HttpReply WebUi::Login(const HttpRequest& req) {
  const int64_t now = o_.clock->NowMs();
  if (req.method == "GET") {
    // Confirm first: a link opened from elsewhere logs nobody in by itself.
    const std::string token = req.Param("token");
    absl::StatusOr<SessionClaims> c = sessions_.CheckLogin(token, now);
    if (!c.ok()) return ErrorPage(c.status());
    const std::string who = c->acting_as.empty() ? c->cert.subject.name
                                                  : absl::StrCat(c->acting_as, " (as ", c->cert.subject.name, ")");
    return Html(SmallPage(
        "herd: log in",
        absl::StrCat("<h1>Log in to cell ", HtmlEscape(o_.core->options().cell_name), "</h1><p>as <b>",
                     HtmlEscape(who), "</b>, with the link <code>herd ui</code> printed.</p>",
                     "<form method=\"post\" action=\"/login\"><input type=\"hidden\" name=\"token\" value=\"",
                     HtmlEscape(token), "\"><button type=\"submit\" id=\"login\">Log in</button></form>")));
  }
  if (absl::Status st = SameOrigin(req); !st.ok()) return ErrorPage(st);
  absl::StatusOr<std::string> session = sessions_.Redeem(FormField(req.body, "token"), now);
  absl::StatusOr<SessionClaims> claims = session.ok() ? sessions_.Check(*session, now)
                                                      : absl::StatusOr<SessionClaims>(session.status());
  // Revoked since the link was made: no session.
  absl::StatusOr<Principal> who = claims.ok() ? Identify(claims->cert, claims->acting_as, o_.core->Users())
                                              : absl::StatusOr<Principal>(claims.status());
  if (!who.ok()) {
    HERD_LOG_WARN("web: refused a login from {}: {}", req.peer, who.status().message());
    return ErrorPage(who.status());
  }
  HERD_LOG_INFO("web: {} logged in from {}", who->name, req.peer);
  HttpReply r;
  r.status = 303;
  r.headers.push_back({"Location", "/"});
  r.headers.push_back({"Set-Cookie", absl::StrCat(WebSessions::kCookieName, "=", *session,
                                                  "; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=",
                                                  WebSessions::kSessionValidMs / 1000)});
  r.body = "<!doctype html><p>Logged in. <a href=\"/\">Go on</a>.</p>";
  return r;
}

HttpReply WebUi::LogOut(const HttpRequest& req) {
  if (req.method != "POST") return ErrorPage(absl::InvalidArgumentError("log out with the page's button (a POST)"));
  if (absl::Status st = SameOrigin(req); !st.ok()) return ErrorPage(st);
  sessions_.LogOut(WebSessions::FromCookie(req.cookie), o_.clock->NowMs());
  HttpReply r;
  r.status = 303;
  r.headers.push_back({"Location", "/"});
  r.headers.push_back({"Set-Cookie", absl::StrCat(WebSessions::kCookieName,
                                                  "=; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=0")});
  r.body = "<!doctype html><p>Logged out.</p>";
  return r;
}

HttpReply WebUi::Logs(const Principal& who, const std::string& job, int32_t index, const HttpRequest& req) {
  v1::GrantAccessRequest g;
  g.set_job(job);
  g.set_index(index);
  g.set_action(v1::READ_LOGS);
  absl::StatusOr<v1::GrantAccessResponse> granted = o_.core->access().GrantAccess(who, g);
  HttpReply r;
  r.content_type = "text/plain; charset=utf-8";
  if (!granted.ok()) {
    r.status = HttpStatus(granted.status());
    r.body = std::string(granted.status().message());
    return r;
  }
  const v1::GetTaskResponse& task = granted->task();
  if (task.run_id().empty() || task.machine().address().empty()) {
    r.body = "";  // has not run yet: nothing to show
    r.headers.push_back({"X-Herd-Log", "not started"});
    return r;
  }
  int64_t tail = 64 << 10;
  if (std::string t = req.Param("tail"); !t.empty() && (!absl::SimpleAtoi(t, &tail) || tail <= 0)) {
    r.status = 400;
    r.body = "tail: a positive number of bytes";
    return r;
  }
  tail = std::min(tail, kMaxTailBytes);
  const std::string stream = req.Param("stream").empty() ? "stdout" : req.Param("stream");
  if (stream != "stdout" && stream != "stderr") {
    r.status = 400;
    r.body = "stream: stdout or stderr";
    return r;
  }
  if (log_reads_.fetch_add(1) >= kMaxLogReads) {
    log_reads_.fetch_sub(1);
    r.status = 503;
    r.body = "too many log reads at once; try again";
    return r;
  }
  absl::StatusOr<std::string> text = o_.read_logs ? o_.read_logs(task, granted->grant(), stream == "stderr", tail)
                                                  : absl::UnavailableError("this master reads no logs");
  log_reads_.fetch_sub(1);
  if (!text.ok()) {
    r.status = 502;
    r.body = absl::StrCat("cannot read the logs from machine ", task.machine().name(), ": ", text.status().message());
  } else {
    r.body = std::move(*text);
  }
  r.headers.push_back({"X-Herd-Run", task.run_id()});
  return r;
}

namespace {

// The pages proper, for one caller.
class Pages {
 public:
  Pages(const WebUiOptions& o, const Principal& who) : o_(o), who_(who) {
    cell_ = o_.core->options().cell_name;
    now_ = o_.clock->NowMs();
  }

  absl::StatusOr<std::string> Overview(const HttpRequest& req) {
    absl::StatusOr<v1::CellInfo> info = o_.core->machines().GetCell(who_);
    if (!info.ok()) return info.status();
    if (o_.describe) o_.describe(&*info);
    absl::StatusOr<v1::ListMachinesResponse> ms = o_.core->machines().ListMachines(who_, {});
    if (!ms.ok()) return ms.status();
    v1::ListJobsRequest jr;
    const bool all = req.Param("all") == "1";
    jr.set_include_dead(all);
    absl::StatusOr<v1::ListJobsResponse> jobs = o_.core->jobs().ListJobs(who_, jr);
    if (!jobs.ok()) return jobs.status();
    v1::Resources cap, alloc;
    for (const v1::Machine& m : ms->machines()) {
      if (m.state() != v1::Machine::UP) continue;
      cap.set_cpu_millis(cap.cpu_millis() + m.capacity().cpu_millis());
      cap.set_memory_bytes(cap.memory_bytes() + m.capacity().memory_bytes());
      alloc.set_cpu_millis(alloc.cpu_millis() + m.allocated().cpu_millis());
      alloc.set_memory_bytes(alloc.memory_bytes() + m.allocated().memory_bytes());
    }
    std::string b = "<section class=\"cards\">";
    auto card = [&](absl::string_view name, const std::string& value, const std::string& extra = "") {
      absl::StrAppend(&b, "<div class=\"card\"><div class=\"k\">", name, "</div><div class=\"v\" data-k=\"",
                      absl::AsciiStrToLower(absl::StrReplaceAll(name, {{" ", "-"}})), "\">", value, "</div>", extra,
                      "</div>");
    };
    card("Machines up", absl::StrCat(info->machines_up(), " / ", info->machines()));
    card("Jobs", absl::StrCat(info->jobs()));
    card("Tasks running", absl::StrCat(info->tasks_running()));
    card("Tasks pending", absl::StrCat(info->tasks_pending()));
    card("CPU allocated", Pct(alloc.cpu_millis(), cap.cpu_millis()),
         absl::StrCat(Bar(alloc.cpu_millis(), cap.cpu_millis()), "<div class=\"muted\">",
                      FormatCpu(alloc.cpu_millis()), " of ", FormatCpu(cap.cpu_millis()), "</div>"));
    card("Memory allocated", Pct(alloc.memory_bytes(), cap.memory_bytes()),
         absl::StrCat(Bar(alloc.memory_bytes(), cap.memory_bytes()), "<div class=\"muted\">",
                      FormatBytes(alloc.memory_bytes()), " of ", FormatBytes(cap.memory_bytes()), "</div>"));
    absl::StrAppend(&b, "</section><table class=\"kv\"><tr><th>Revision</th><td data-k=\"revision\">", info->revision(),
                    " (durable ", info->durable_revision(), ")</td></tr><tr><th>This master</th><td>",
                    HtmlEscape(info->replica()), " (", HtmlEscape(info->role()), ")</td></tr><tr><th>Leader</th><td>",
                    HtmlEscape(info->leader()), "</td></tr><tr><th>Store</th><td>", HtmlEscape(info->store()),
                    "</td></tr><tr><th>DNS</th><td>", HtmlEscape(info->dns().empty() ? "-" : info->dns()),
                    "</td></tr><tr><th>Version</th><td>", HtmlEscape(info->version()), ", up ",
                    HtmlEscape(Ago(info->started_ms(), now_)), "</td></tr><tr><th>Agent polls</th><td>",
                    info->link().polls(), " (", info->link().failures(), " failed), p50 ",
                    absl::StrFormat("%.1f", info->link().latency_p50_ms()), " ms, p99 ",
                    absl::StrFormat("%.1f", info->link().latency_p99_ms()), " ms</td></tr></table>");
    if (o_.alerts != nullptr) {
      v1::ListAlertsResponse alerts = o_.alerts->List(false);
      if (alerts.alerts_size() > 0) {
        absl::StrAppend(&b, "<h2>Alarms firing</h2><ul class=\"alerts\">");
        for (const auto& a : alerts.alerts()) absl::StrAppend(&b, "<li>", HtmlEscape(a.message()), "</li>");
        absl::StrAppend(&b, "</ul>");
      }
    }
    absl::StrAppend(&b, "<h2>Jobs</h2><p class=\"muted\">", all ? Link("/", "only live jobs") : Link("/?all=1", "with finished jobs"),
                    "</p>", JobsTable(jobs->jobs()));
    return Page("Cell " + cell_, "Cell", who_, cell_, b);
  }

  std::string JobsTable(const google::protobuf::RepeatedPtrField<v1::Job>& jobs) {
    std::vector<const v1::Job*> sorted;
    for (const v1::Job& j : jobs) sorted.push_back(&j);
    std::sort(sorted.begin(), sorted.end(), [](const v1::Job* a, const v1::Job* b) { return a->id() < b->id(); });
    std::string b =
        "<table class=\"list\" id=\"jobs\"><thead><tr><th>Job</th><th>User</th><th>Priority</th><th>State</th>"
        "<th>Running</th><th>Pending</th><th>Dead</th><th>Tasks</th><th>Version</th><th>Submitted</th></tr></thead><tbody>";
    for (const v1::Job* j : sorted) {
      const std::string state = v1::Job::State_Name(j->state());
      absl::StrAppend(&b, "<tr data-job=\"", HtmlEscape(j->id()), "\"><td>", Link(JobUrl(j->id()), j->spec().name()),
                      "</td><td>", HtmlEscape(j->spec().user()), "</td><td>", j->spec().priority(), " (",
                      BandNameOf(j->spec().priority()), ")</td><td><span class=\"", StateClass(state), "\">", state,
                      "</span></td><td class=\"n running\">", j->running(), "</td><td class=\"n pending\">", j->pending(),
                      "</td><td class=\"n dead\">", j->dead(), "</td><td class=\"n\">", j->spec().task_count(),
                      "</td><td class=\"n\">", j->version(), "</td><td>", HtmlEscape(Time(j->submit_time_ms())),
                      "</td></tr>");
    }
    if (sorted.empty()) absl::StrAppend(&b, "<tr><td colspan=\"10\" class=\"muted\">no jobs</td></tr>");
    absl::StrAppend(&b, "</tbody></table>");
    return b;
  }

  absl::StatusOr<std::string> Machines() {
    absl::StatusOr<v1::ListMachinesResponse> ms = o_.core->machines().ListMachines(who_, {});
    if (!ms.ok()) return ms.status();
    // The latest usage sample of each machine, from the history.
    std::map<std::string, std::pair<double, double>> usage;
    absl::StatusOr<v1::QueryHistoryResponse> rows = Query(
        o_.history,
        absl::StrCat("SELECT machine, cpu_millis, memory_bytes, MAX(time_ms) FROM machine_usage WHERE time_ms >= ",
                     now_ - 15 * 60 * 1000, " GROUP BY machine"),
        100'000);
    if (rows.ok()) {
      for (const auto& row : rows->rows()) {
        usage[Str(row.values(0))] = {Num(row.values(1)), Num(row.values(2))};
      }
    }
    std::string b = absl::StrCat(
        "<p class=\"muted\">Bars: allocated (the limits of the tasks placed there) of capacity; the thin dark bar is "
        "the usage the agent last reported", rows.ok() ? "" : " (no usage here: " + HtmlEscape(rows.status().message()) + ")",
        ".</p><table class=\"list\" id=\"machines\"><thead><tr><th>Machine</th><th>State</th><th>Tasks</th>"
        "<th>CPU</th><th></th><th>Memory</th><th></th><th>Address</th></tr></thead><tbody>");
    std::vector<const v1::Machine*> sorted;
    for (const v1::Machine& m : ms->machines()) sorted.push_back(&m);
    std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->name() < b->name(); });
    for (const v1::Machine* m : sorted) {
      std::string state = v1::Machine::State_Name(m->state());
      if (m->drained()) absl::StrAppend(&state, " drained");
      auto u = usage.find(m->name());
      const double cpu_use = u == usage.end() ? -1 : u->second.first;
      const double mem_use = u == usage.end() ? -1 : u->second.second;
      absl::StrAppend(&b, "<tr data-machine=\"", HtmlEscape(m->name()), "\"><td>", HtmlEscape(m->name()),
                      "</td><td><span class=\"", StateClass(v1::Machine::State_Name(m->state())), "\" title=\"",
                      HtmlEscape(m->reason()), "\">", HtmlEscape(state), "</span></td><td class=\"n tasks\">",
                      m->task_count(), "</td><td>", Bar(m->allocated().cpu_millis(), m->capacity().cpu_millis(), cpu_use),
                      "</td><td class=\"n\">", FormatCpu(m->allocated().cpu_millis()), " / ",
                      FormatCpu(m->capacity().cpu_millis()),
                      cpu_use >= 0 ? absl::StrCat("<br><span class=\"muted\">uses ", FormatCpu(static_cast<int64_t>(cpu_use)), "</span>") : "",
                      "</td><td>", Bar(m->allocated().memory_bytes(), m->capacity().memory_bytes(), mem_use),
                      "</td><td class=\"n\">", FormatBytes(m->allocated().memory_bytes()), " / ",
                      FormatBytes(m->capacity().memory_bytes()),
                      mem_use >= 0 ? absl::StrCat("<br><span class=\"muted\">uses ", FormatBytes(static_cast<int64_t>(mem_use)), "</span>") : "",
                      "</td><td>", HtmlEscape(m->address()), "</td></tr>");
    }
    absl::StrAppend(&b, "</tbody></table>");
    return Page("Machines", "Machines", who_, cell_, b);
  }

  absl::StatusOr<std::string> Users() {
    absl::StatusOr<v1::ListQuotasResponse> qs = o_.core->machines().ListQuotas(who_, {});
    if (!qs.ok()) return qs.status();
    std::string b =
        "<table class=\"list\" id=\"quotas\"><thead><tr><th>User</th><th>Band</th><th>CPU used</th><th>of quota</th>"
        "<th></th><th>Memory used</th><th>of quota</th><th></th></tr></thead><tbody>";
    for (const v1::QuotaUsage& q : qs->quotas()) {
      const bool limited_cpu = !q.unlimited() && q.quota().limit().cpu_millis() > 0;
      const bool limited_mem = !q.unlimited() && q.quota().limit().memory_bytes() > 0;
      absl::StrAppend(&b, "<tr><td>", HtmlEscape(q.quota().user()), "</td><td>", HtmlEscape(q.quota().band()),
                      "</td><td class=\"n\">", FormatCpu(q.used().cpu_millis()), "</td><td class=\"n\">",
                      limited_cpu ? FormatCpu(q.quota().limit().cpu_millis()) : "unlimited", "</td><td>",
                      limited_cpu ? Bar(q.used().cpu_millis(), q.quota().limit().cpu_millis()) : "",
                      "</td><td class=\"n\">", FormatBytes(q.used().memory_bytes()), "</td><td class=\"n\">",
                      limited_mem ? FormatBytes(q.quota().limit().memory_bytes()) : "unlimited", "</td><td>",
                      limited_mem ? Bar(q.used().memory_bytes(), q.quota().limit().memory_bytes()) : "",
                      "</td></tr>");
    }
    if (qs->quotas_size() == 0) absl::StrAppend(&b, "<tr><td colspan=\"8\" class=\"muted\">no quotas and no usage</td></tr>");
    absl::StrAppend(&b, "</tbody></table>");
    return Page("Users and quota", "Users", who_, cell_, b);
  }

  absl::StatusOr<std::string> Pending() {
    absl::StatusOr<v1::ListJobsResponse> jobs = o_.core->jobs().ListJobs(who_, {});
    if (!jobs.ok()) return jobs.status();
    std::vector<const v1::Job*> waiting;
    for (const v1::Job& j : jobs->jobs()) {
      if (j.pending() > 0) waiting.push_back(&j);
    }
    // The scheduler's order: priority, then who waited longest.
    std::sort(waiting.begin(), waiting.end(), [](const v1::Job* a, const v1::Job* b) {
      if (a->spec().priority() != b->spec().priority()) return a->spec().priority() > b->spec().priority();
      return a->submit_time_ms() < b->submit_time_ms();
    });
    int64_t total = 0;
    for (const v1::Job* j : waiting) total += j->pending();
    std::string b = absl::StrCat("<p><span data-k=\"pending-total\">", total, "</span> tasks pending in ", waiting.size(),
                                 " jobs.</p><table class=\"list\" id=\"pending\"><thead><tr><th>Job</th><th>Priority</th>"
                                 "<th>Pending</th><th>Waiting since</th><th>Why</th></tr></thead><tbody>");
    constexpr size_t kWhyJobs = 200;  // the scheduler's reasons for the first ones
    for (size_t i = 0; i < waiting.size(); ++i) {
      const v1::Job* j = waiting[i];
      std::string why;
      if (i < kWhyJobs) {
        v1::WhyRequest wr;
        wr.set_job(j->id());
        absl::StatusOr<v1::WhyResponse> w = o_.core->jobs().Why(who_, wr);
        if (w.ok()) {
          for (const auto& d : w->pending()) absl::StrAppend(&why, why.empty() ? "" : "<br>", HtmlEscape(d.text()));
          if (why.empty()) why = HtmlEscape(w->note());
        }
      }
      absl::StrAppend(&b, "<tr data-job=\"", HtmlEscape(j->id()), "\"><td>", Link(JobUrl(j->id()), j->id()), "</td><td>",
                      j->spec().priority(), " (", BandNameOf(j->spec().priority()), ")</td><td class=\"n pending\">",
                      j->pending(), "</td><td>", HtmlEscape(Ago(j->submit_time_ms(), now_)), "</td><td>", why,
                      "</td></tr>");
    }
    absl::StrAppend(&b, "</tbody></table>");
    return Page("Pending queue", "Pending", who_, cell_, b);
  }

  absl::StatusOr<std::string> Job(const std::string& id, const HttpRequest& req) {
    v1::GetJobRequest gr;
    gr.set_job(id);
    absl::StatusOr<v1::GetJobResponse> job = o_.core->jobs().GetJob(who_, gr);
    if (!job.ok()) return job.status();
    const v1::Job& j = job->job();
    v1::HistoryRequest hr;
    hr.set_job(id);
    absl::StatusOr<v1::HistoryResponse> versions = o_.core->rollouts().History(who_, hr);
    v1::WhyRequest wr;
    wr.set_job(id);
    absl::StatusOr<v1::WhyResponse> why = o_.core->jobs().Why(who_, wr);

    std::string b = absl::StrCat(
        "<table class=\"kv\"><tr><th>State</th><td><span class=\"", StateClass(v1::Job::State_Name(j.state())), "\">",
        v1::Job::State_Name(j.state()), "</span></td></tr><tr><th>Tasks</th><td><span data-k=\"running\">", j.running(),
        "</span> running, <span data-k=\"pending\">", j.pending(), "</span> pending, <span data-k=\"dead\">", j.dead(),
        "</span> dead, of ", j.spec().task_count(), "</td></tr><tr><th>Priority</th><td>", j.spec().priority(), " (",
        BandNameOf(j.spec().priority()), ")</td></tr><tr><th>Each task</th><td>", Resources(j.spec().task().resources()),
        "</td></tr><tr><th>Version</th><td>", j.version(), "</td></tr><tr><th>Submitted</th><td>",
        HtmlEscape(Time(j.submit_time_ms())), "</td></tr>");
    if (j.has_rollout() && j.rollout().version() > 0) {
      const v1::Rollout& r = j.rollout();
      absl::StrAppend(&b, "<tr><th>Rollout</th><td>", v1::Rollout::State_Name(r.state()), ": version ", r.from_version(),
                      " → ", r.version(), ", ", r.outdated(), " outdated", r.message().empty() ? "" : " — ",
                      HtmlEscape(r.message()), "</td></tr>");
    }
    absl::StrAppend(&b, "</table>");

    // Why pending, with the scheduler's reasons and suggestions.
    if (j.pending() > 0 && why.ok()) {
      absl::StrAppend(&b, "<h2>Why pending</h2><div class=\"why\">");
      if (why->pending_size() == 0) absl::StrAppend(&b, "<p>", HtmlEscape(why->note()), "</p>");
      for (const auto& d : why->pending()) {
        absl::StrAppend(&b, "<p><b>", d.indexes_size(), " task", d.indexes_size() == 1 ? "" : "s", ":</b> ",
                        HtmlEscape(d.text()), "</p>");
        if (d.suggestions_size() > 0) {
          absl::StrAppend(&b, "<ul class=\"suggest\">");
          for (const auto& s : d.suggestions()) absl::StrAppend(&b, "<li>", HtmlEscape(s), "</li>");
          absl::StrAppend(&b, "</ul>");
        }
      }
      absl::StrAppend(&b, "</div>");
    }

    // Tasks, a page at a time.
    int page = 0;
    (void)absl::SimpleAtoi(req.Param("page"), &page);
    const int pages = std::max(1, (job->tasks_size() + WebUi::kTasksPerPage - 1) / WebUi::kTasksPerPage);
    page = std::clamp(page, 0, pages - 1);
    absl::StrAppend(&b, "<h2>Tasks</h2>");
    if (pages > 1) {
      absl::StrAppend(&b, "<p class=\"pager\">Page ", page + 1, " of ", pages, ": ");
      if (page > 0) absl::StrAppend(&b, Link(absl::StrCat(JobUrl(id), "?page=", page - 1), "previous"), " ");
      if (page + 1 < pages) absl::StrAppend(&b, Link(absl::StrCat(JobUrl(id), "?page=", page + 1), "next"));
      absl::StrAppend(&b, "</p>");
    }
    absl::StrAppend(&b,
                    "<table class=\"list\" id=\"tasks\"><thead><tr><th>Task</th><th>State</th><th>Machine</th>"
                    "<th>Version</th><th>Restarts</th><th>Health</th><th>Last event</th></tr></thead><tbody>");
    const int begin = page * WebUi::kTasksPerPage;
    const int end = std::min(job->tasks_size(), begin + WebUi::kTasksPerPage);
    for (int i = begin; i < end; ++i) {
      const v1::Task& t = job->tasks(i);
      std::string last = EventText(t.last_event());
      auto w = job->why_pending().find(t.index());
      if (t.state() == v1::Task::PENDING && w != job->why_pending().end()) last = w->second;
      absl::StrAppend(&b, "<tr data-task=\"", t.index(), "\"><td>", Link(TaskUrl(id, t.index()), absl::StrCat(t.index())),
                      "</td><td><span class=\"", StateClass(v1::Task::State_Name(t.state())), "\">", TaskState(t),
                      "</span></td><td>", HtmlEscape(t.machine()), "</td><td class=\"n\">", t.job_version(),
                      "</td><td class=\"n\">", t.restarts(), "</td><td>", HtmlEscape(t.health()), "</td><td>",
                      HtmlEscape(last), "</td></tr>");
    }
    absl::StrAppend(&b, "</tbody></table>");

    // Versions.
    if (versions.ok()) {
      absl::StrAppend(&b, "<h2>Versions</h2><table class=\"list\" id=\"versions\"><thead><tr><th>Version</th><th>When</th>"
                          "<th>By</th><th>What</th></tr></thead><tbody>");
      for (auto it = versions->versions().rbegin(); it != versions->versions().rend(); ++it) {
        absl::StrAppend(&b, "<tr><td class=\"n\">", it->version(), it->version() == versions->version() ? " (current)" : "",
                        "</td><td>", HtmlEscape(Time(it->time_ms())), "</td><td>", HtmlEscape(it->actor()), "</td><td>",
                        HtmlEscape(it->reason()), "</td></tr>");
      }
      absl::StrAppend(&b, "</tbody></table>");
    }

    // Events, newest first: the history's when it is here, else the tasks' own.
    absl::StrAppend(&b, "<h2>Events</h2>");
    absl::StatusOr<v1::QueryHistoryResponse> ev = Query(
        o_.history, absl::StrCat("SELECT time_ms, task_index, event, machine, reason FROM task_events WHERE job = ",
                                 Sql(id), " ORDER BY time_ms DESC, revision DESC LIMIT 100"));
    absl::StrAppend(&b, "<table class=\"list\" id=\"events\"><thead><tr><th>When</th><th>Task</th><th>Event</th>"
                        "<th>Machine</th><th>Reason</th></tr></thead><tbody>");
    if (ev.ok()) {
      for (const auto& row : ev->rows()) {
        absl::StrAppend(&b, "<tr><td>", HtmlEscape(Time(static_cast<int64_t>(Num(row.values(0))))), "</td><td>",
                        Link(TaskUrl(id, static_cast<int32_t>(Num(row.values(1)))), Str(row.values(1))), "</td><td>",
                        HtmlEscape(Str(row.values(2))), "</td><td>", HtmlEscape(Str(row.values(3))), "</td><td>",
                        HtmlEscape(Str(row.values(4))), "</td></tr>");
      }
    } else {
      std::vector<std::pair<int64_t, std::string>> events;
      for (const v1::Task& t : job->tasks()) {
        for (const v1::Event& e : t.history()) events.emplace_back(e.time_ms(), absl::StrCat(t.index(), "\t", EventText(e)));
      }
      std::sort(events.rbegin(), events.rend());
      if (events.size() > 100) events.resize(100);
      for (const auto& [t, text] : events) {
        std::pair<std::string, std::string> parts = absl::StrSplit(text, absl::MaxSplits('\t', 1));
        absl::StrAppend(&b, "<tr><td>", HtmlEscape(Time(t)), "</td><td>", HtmlEscape(parts.first), "</td><td colspan=\"3\">",
                        HtmlEscape(parts.second), "</td></tr>");
      }
    }
    absl::StrAppend(&b, "</tbody></table>");

    // The spec, as the API returns it (secrets hidden unless the caller may see them).
    std::string spec;
    google::protobuf::util::JsonPrintOptions jo;
    jo.add_whitespace = true;
    (void)google::protobuf::util::MessageToJsonString(j.spec(), &spec, jo);
    absl::StrAppend(&b, "<h2>Spec</h2><pre class=\"spec\">", HtmlEscape(spec), "</pre>");
    return Page(absl::StrCat("Job ", id), "", who_, cell_, b);
  }

  absl::StatusOr<std::string> Task(const std::string& id, int32_t index) {
    v1::GetTaskRequest tr;
    tr.set_job(id);
    tr.set_index(index);
    absl::StatusOr<v1::GetTaskResponse> task = o_.core->jobs().GetTask(who_, tr);
    if (!task.ok()) return task.status();
    const v1::Task& t = task->task();
    std::string ports;
    std::map<std::string, int32_t> sorted_ports(t.ports().begin(), t.ports().end());
    for (const auto& [name, port] : sorted_ports) {
      absl::StrAppend(&ports, ports.empty() ? "" : ", ", HtmlEscape(name), " ", port);
    }
    std::string b = absl::StrCat(
        "<p>", Link(JobUrl(id), absl::StrCat("job ", id)), "</p><table class=\"kv\"><tr><th>State</th><td><span class=\"",
        StateClass(v1::Task::State_Name(t.state())), "\" data-k=\"state\">", TaskState(t), "</span></td></tr>",
        "<tr><th>Machine</th><td data-k=\"machine\">", HtmlEscape(t.machine()), "</td></tr><tr><th>Resources</th><td>",
        Resources(t.resources()), "</td></tr><tr><th>Ports</th><td>", ports.empty() ? "-" : ports,
        "</td></tr><tr><th>Health</th><td>", HtmlEscape(t.health().empty() ? "-" : t.health()),
        "</td></tr><tr><th>Restarts</th><td data-k=\"restarts\">", t.restarts(), "</td></tr><tr><th>Incarnation</th><td>",
        t.incarnation(), "</td></tr><tr><th>Started</th><td>", HtmlEscape(Time(t.started_ms())), "</td></tr>",
        "<tr><th>Last exit</th><td>", t.exit_signal() != 0 ? absl::StrCat("signal ", t.exit_signal()) : absl::StrCat("code ", t.exit_code()),
        "</td></tr><tr><th>Version</th><td>", t.job_version(), "</td></tr>");
    if (!t.message().empty()) absl::StrAppend(&b, "<tr><th>Message</th><td>", HtmlEscape(t.message()), "</td></tr>");
    absl::StrAppend(&b, "</table>");

    // Usage over the last six hours, from the history.
    absl::StatusOr<v1::QueryHistoryResponse> use = Query(
        o_.history, absl::StrCat("SELECT time_ms, cpu_millis, memory_bytes FROM usage WHERE job = ", Sql(id),
                                 " AND task_index = ", index, " AND time_ms >= ", now_ - 6 * 3600 * 1000,
                                 " ORDER BY time_ms"));
    absl::StrAppend(&b, "<h2>Usage</h2>");
    if (use.ok()) {
      std::vector<std::pair<int64_t, double>> cpu, mem;
      for (const auto& row : use->rows()) {
        const int64_t at = static_cast<int64_t>(Num(row.values(0)));
        cpu.emplace_back(at, Num(row.values(1)));
        mem.emplace_back(at, Num(row.values(2)));
      }
      absl::StrAppend(&b, "<div class=\"charts\" id=\"usage\" data-samples=\"", cpu.size(), "\">",
                      SvgChart(cpu, "CPU (cores)", [](double v) { return FormatCpu(static_cast<int64_t>(v)); }),
                      SvgChart(mem, "Memory", [](double v) { return FormatBytes(static_cast<int64_t>(v)); }), "</div>");
    } else {
      absl::StrAppend(&b, "<p class=\"muted\">", HtmlEscape(use.status().message()), "</p>");
    }

    // The log tail, followed by ui.js.
    const std::string logs = absl::StrCat("/api/logs/", Url(id.substr(0, id.find('/'))), "/",
                                          Url(id.substr(id.find('/') + 1)), "/", index);
    absl::StrAppend(&b, "<h2>Log <a href=\"", HtmlEscape(logs), "?stream=stdout\" class=\"small\">stdout</a> <a href=\"",
                    HtmlEscape(logs), "?stream=stderr\" class=\"small\">stderr</a></h2><pre class=\"log\" id=\"log\" data-src=\"",
                    HtmlEscape(logs), "?stream=stdout&amp;tail=65536\"></pre><p class=\"muted\" id=\"log-status\"></p>");

    absl::StrAppend(&b, "<h2>Events</h2><table class=\"list\" id=\"events\"><thead><tr><th>When</th><th>Event</th></tr>"
                        "</thead><tbody>");
    for (auto it = t.history().rbegin(); it != t.history().rend(); ++it) {
      absl::StrAppend(&b, "<tr><td>", HtmlEscape(Time(it->time_ms())), "</td><td>", HtmlEscape(EventText(*it)),
                      "</td></tr>");
    }
    absl::StrAppend(&b, "</tbody></table>");
    return Page(absl::StrCat("Task ", id, "/", index), "", who_, cell_, b);
  }

 private:
  const WebUiOptions& o_;
  const Principal& who_;
  std::string cell_;
  int64_t now_ = 0;
};

}  // namespace

HttpReply WebUi::Handle(const HttpRequest& req) {
  const std::vector<std::string> parts = absl::StrSplit(req.path, '/', absl::SkipEmpty());
  if (req.path == "/static/ui.css") return HttpReply{200, "text/css; charset=utf-8", std::string(kUiCss), {}};
  if (req.path == "/static/ui.js") return HttpReply{200, "text/javascript; charset=utf-8", std::string(kUiJs), {}};
  if (req.path == "/login") return Login(req);
  if (req.path == "/logout") return LogOut(req);
  if (req.method != "GET") return ErrorPage(absl::InvalidArgumentError("pages only read: GET"));

  // Who: a client certificate, else the session cookie.
  absl::StatusOr<Principal> who = absl::UnauthenticatedError("not logged in");
  const UserRecords users = o_.core->Users();
  if (req.cert) {
    who = Identify(*req.cert, "", users);
  } else if (std::string token = WebSessions::FromCookie(req.cookie); !token.empty()) {
    absl::StatusOr<SessionClaims> claims = sessions_.Check(token, o_.clock->NowMs());
    who = claims.ok() ? Identify(claims->cert, claims->acting_as, users) : absl::StatusOr<Principal>(claims.status());
  }
  if (who.ok() && who->kind != Principal::Kind::kUser) {
    who = absl::PermissionDeniedError("the web UI is for users; this credential is not a user's");
  }
  if (who.ok() && o_.limiter != nullptr) {
    if (absl::Status st = o_.limiter->Admit(*who); !st.ok()) who = st;
  }
  if (!who.ok()) return ErrorPage(who.status());

  // A user's requests being answered at once are bounded: a few open tabs
  // (each following a log) or a script cannot take every handler.
  const std::string user = who->acting_user.empty() ? who->name : who->acting_user;
  {
    absl::MutexLock l(&busy_mu_);
    if (busy_[user] >= kMaxPerUser) {
      HttpReply r = ErrorPage(absl::ResourceExhaustedError(
          absl::StrCat(user, " has ", kMaxPerUser, " requests being answered already; try again")));
      r.headers.push_back({"Retry-After", "1"});
      return r;
    }
    ++busy_[user];
  }
  struct Done {
    WebUi* ui;
    std::string user;
    ~Done() {
      absl::MutexLock l(&ui->busy_mu_);
      if (--ui->busy_[user] <= 0) ui->busy_.erase(user);
    }
  } done{this, user};

  Pages pages(o_, *who);
  absl::StatusOr<std::string> page = absl::NotFoundError(absl::StrCat("no page ", req.path));
  int32_t index = 0;
  if (parts.empty()) {
    page = pages.Overview(req);
  } else if (parts.size() == 1 && parts[0] == "machines") {
    page = pages.Machines();
  } else if (parts.size() == 1 && parts[0] == "users") {
    page = pages.Users();
  } else if (parts.size() == 1 && parts[0] == "pending") {
    page = pages.Pending();
  } else if (parts.size() == 3 && parts[0] == "job") {
    page = pages.Job(JobId(parts[1], parts[2]), req);
  } else if (parts.size() == 4 && parts[0] == "job" && absl::SimpleAtoi(parts[3], &index)) {
    page = pages.Task(JobId(parts[1], parts[2]), index);
  } else if (parts.size() == 5 && parts[0] == "api" && parts[1] == "logs" && absl::SimpleAtoi(parts[4], &index)) {
    return Logs(*who, JobId(parts[2], parts[3]), index, req);
  }
  if (!page.ok()) return ErrorPage(page.status());
  return Html(std::move(*page));
}

}  // namespace herd::master::web
