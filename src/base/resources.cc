#include "base/resources.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/units.h"

namespace herd {

ResourceVector ResourceVector::FromProto(const v1::Resources& r) {
  ResourceVector v;
  v.cpu_millis = r.cpu_millis();
  v.memory_bytes = r.memory_bytes();
  v.disk_bytes = r.disk_bytes();
  v.ports = r.ports();
  for (const auto& [k, val] : r.extended()) {
    if (val != 0) v.extended.emplace_back(k, val);
  }
  std::sort(v.extended.begin(), v.extended.end());
  return v;
}

void ResourceVector::ToProto(v1::Resources* out) const {
  out->Clear();
  out->set_cpu_millis(cpu_millis);
  out->set_memory_bytes(memory_bytes);
  out->set_disk_bytes(disk_bytes);
  out->set_ports(ports);
  for (const auto& [k, val] : extended) (*out->mutable_extended())[k] = val;
}

v1::Resources ResourceVector::ToProto() const {
  v1::Resources r;
  ToProto(&r);
  return r;
}

int64_t ResourceVector::Extended(absl::string_view name) const {
  for (const auto& [k, v] : extended) {
    if (k == name) return v;
  }
  return 0;
}

void ResourceVector::SetExtended(absl::string_view name, int64_t value) {
  auto it = std::lower_bound(extended.begin(), extended.end(), name,
                             [](const auto& e, absl::string_view n) { return e.first < n; });
  if (it != extended.end() && it->first == name) {
    if (value == 0) {
      extended.erase(it);
    } else {
      it->second = value;
    }
  } else if (value != 0) {
    extended.insert(it, {std::string(name), value});
  }
}

namespace {
template <typename Op>
void MergeExtended(std::vector<std::pair<std::string, int64_t>>& a,
                   const std::vector<std::pair<std::string, int64_t>>& b, Op op) {
  if (b.empty()) return;
  std::vector<std::pair<std::string, int64_t>> out;
  out.reserve(a.size() + b.size());
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].first < b[j].first)) {
      out.push_back(std::move(a[i++]));
    } else if (i == a.size() || b[j].first < a[i].first) {
      int64_t v = op(0, b[j].second);
      if (v != 0) out.emplace_back(b[j].first, v);
      ++j;
    } else {
      int64_t v = op(a[i].second, b[j].second);
      if (v != 0) out.emplace_back(std::move(a[i].first), v);
      ++i;
      ++j;
    }
  }
  a = std::move(out);
}
}  // namespace

ResourceVector& ResourceVector::operator+=(const ResourceVector& o) {
  cpu_millis += o.cpu_millis;
  memory_bytes += o.memory_bytes;
  disk_bytes += o.disk_bytes;
  ports += o.ports;
  MergeExtended(extended, o.extended, [](int64_t x, int64_t y) { return x + y; });
  return *this;
}

ResourceVector& ResourceVector::operator-=(const ResourceVector& o) {
  cpu_millis -= o.cpu_millis;
  memory_bytes -= o.memory_bytes;
  disk_bytes -= o.disk_bytes;
  ports -= o.ports;
  MergeExtended(extended, o.extended, [](int64_t x, int64_t y) { return x - y; });
  return *this;
}

bool ResourceVector::FitsIn(const ResourceVector& avail) const {
  if (cpu_millis > avail.cpu_millis || memory_bytes > avail.memory_bytes ||
      disk_bytes > avail.disk_bytes || ports > avail.ports) {
    return false;
  }
  for (const auto& [k, v] : extended) {
    if (v > avail.Extended(k)) return false;
  }
  return true;
}

std::optional<std::string> ResourceVector::FirstShortfall(const ResourceVector& avail) const {
  if (cpu_millis > avail.cpu_millis) return "cpu";
  if (memory_bytes > avail.memory_bytes) return "memory";
  if (disk_bytes > avail.disk_bytes) return "disk";
  if (ports > avail.ports) return "ports";
  for (const auto& [k, v] : extended) {
    if (v > avail.Extended(k)) return k;
  }
  return std::nullopt;
}

bool ResourceVector::IsZero() const {
  return cpu_millis == 0 && memory_bytes == 0 && disk_bytes == 0 && ports == 0 && extended.empty();
}

bool ResourceVector::AnyNegative() const {
  if (cpu_millis < 0 || memory_bytes < 0 || disk_bytes < 0 || ports < 0) return true;
  for (const auto& [k, v] : extended) {
    if (v < 0) return true;
  }
  return false;
}

int64_t ResourceVector::Get(absl::string_view dim) const {
  if (dim == "cpu") return cpu_millis;
  if (dim == "memory") return memory_bytes;
  if (dim == "disk") return disk_bytes;
  if (dim == "ports") return ports;
  return Extended(dim);
}

std::string FormatDimension(absl::string_view dim, int64_t value) {
  if (dim == "cpu") return FormatCpu(value);
  if (dim == "memory" || dim == "disk") return FormatBytes(value);
  return absl::StrCat(value);
}

std::string ResourceVector::ToString() const {
  std::string out;
  auto add = [&](absl::string_view dim, int64_t v) {
    if (v == 0) return;
    if (!out.empty()) out += ' ';
    absl::StrAppend(&out, dim, "=", FormatDimension(dim, v));
  };
  add("cpu", cpu_millis);
  add("memory", memory_bytes);
  add("disk", disk_bytes);
  add("ports", ports);
  for (const auto& [k, v] : extended) add(k, v);
  if (out.empty()) out = "none";
  return out;
}

absl::StatusOr<ResourceVector> ParseResourceList(absl::string_view text) {
  ResourceVector v;
  for (absl::string_view item : absl::StrSplit(text, absl::ByAnyChar(", "), absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (kv.second.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("'", item, "' is not NAME=VALUE (e.g. cpu=2,memory=4Gi)"));
    }
    absl::string_view k = kv.first;
    absl::StatusOr<int64_t> val;
    if (k == "cpu") {
      val = ParseCpuMillis(kv.second);
    } else if (k == "memory" || k == "mem" || k == "disk") {
      val = ParseBytes(kv.second);
    } else {
      val = ParseCount(kv.second);
    }
    if (!val.ok()) return absl::InvalidArgumentError(absl::StrCat(k, ": ", val.status().message()));
    if (k == "cpu") {
      v.cpu_millis = *val;
    } else if (k == "memory" || k == "mem") {
      v.memory_bytes = *val;
    } else if (k == "disk") {
      v.disk_bytes = *val;
    } else if (k == "ports") {
      v.ports = *val;
    } else {
      v.SetExtended(k, *val);
    }
  }
  return v;
}

}  // namespace herd
