#include "sim/trace/google2011.h"

#include <zlib.h>

#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace herd::sim {

absl::Status ReadGzipLines(const std::string& path, const std::function<bool(absl::string_view, int64_t)>& fn) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  gzbuffer(f, 1 << 17);
  std::string line;
  char buf[1 << 16];
  int64_t n = 0;
  absl::Status st;
  while (gzgets(f, buf, sizeof(buf)) != nullptr) {
    line.append(buf);
    if (line.empty() || line.back() != '\n') {
      if (!gzeof(f)) continue;  // a line longer than the buffer
    }
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    ++n;
    if (!fn(line, n)) break;
    line.clear();
  }
  int err = 0;
  const char* msg = gzerror(f, &err);
  if (err != Z_OK && err != Z_STREAM_END) st = absl::DataLossError(absl::StrCat(path, ": ", msg));
  gzclose(f);
  return st;
}

absl::StatusOr<std::vector<TraceMachine>> LoadGoogle2011Machines(const std::string& path, int64_t at_us) {
  std::map<int64_t, TraceMachine> live;
  absl::Status bad;
  absl::Status st = ReadGzipLines(path, [&](absl::string_view line, int64_t n) {
    if (line.empty()) return true;
    std::vector<absl::string_view> f = absl::StrSplit(line, ',');
    int64_t ts = 0, id = 0, type = 0;
    if (f.size() != 6 || !absl::SimpleAtoi(f[0], &ts) || !absl::SimpleAtoi(f[1], &id) ||
        !absl::SimpleAtoi(f[2], &type) || type < 0 || type > 2) {
      bad = absl::InvalidArgumentError(absl::StrCat(path, ":", n, ": not a machine_events row: '",
                                                    line.substr(0, 120), "'"));
      return false;
    }
    if (ts > at_us) return false;  // rows are in time order
    if (type == 1) {
      live.erase(id);
      return true;
    }
    double cpu = 0, mem = 0;
    if (!absl::SimpleAtod(f[4], &cpu) || !absl::SimpleAtod(f[5], &mem) || cpu <= 0 || mem <= 0) {
      return true;  // capacity unknown in this row
    }
    TraceMachine& m = live[id];
    m.id = id;
    m.platform = std::string(f[3]);
    m.cpu = cpu;
    m.memory = mem;
    return true;
  });
  if (!bad.ok()) return bad;
  if (!st.ok()) return st;
  std::vector<TraceMachine> out;
  out.reserve(live.size());
  for (auto& [id, m] : live) out.push_back(std::move(m));
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no machines at time ", at_us));
  return out;
}

}  // namespace herd::sim
