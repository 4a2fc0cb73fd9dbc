#include "base/ids.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace herd {

std::string Quote(absl::string_view text, size_t max) {
  std::string out;
  size_t used = 0;
  for (unsigned char c : text) {
    if (used >= max) {
      absl::StrAppend(&out, "...(", text.size(), " bytes)");
      break;
    }
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
    ++used;
  }
  return out;
}

namespace {

absl::Status ValidateSimpleName(absl::string_view name, absl::string_view what) {
  if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " name must not be empty"));
  if (name.size() > 63) {
    return absl::InvalidArgumentError(absl::StrCat(what, " name '", Quote(name), "' is longer than 63 characters"));
  }
  if (!absl::ascii_islower(name[0])) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " name '", Quote(name), "' must start with a lowercase letter"));
  }
  for (char c : name) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-' || c == '_' || c == '.')) {
      return absl::InvalidArgumentError(absl::StrCat(what, " name '", Quote(name), "' has the character '",
                                                     Quote(std::string(1, c)), "'; use a-z, 0-9, '-', '_' and '.'"));
    }
  }
  if (name.back() == '-' || name.back() == '.') {
    return absl::InvalidArgumentError(absl::StrCat(what, " name '", Quote(name), "' must not end in '-' or '.'"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateJobName(absl::string_view name) { return ValidateSimpleName(name, "job"); }
absl::Status ValidateUserName(absl::string_view name) { return ValidateSimpleName(name, "user"); }

absl::Status ValidateMachineName(absl::string_view name) {
  if (name.empty() || name.size() > 253) {
    return absl::InvalidArgumentError("machine name must be 1-253 characters");
  }
  for (char c : name) {
    if (!(absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == ':')) {
      return absl::InvalidArgumentError(absl::StrCat("machine name '", Quote(name), "' has the character '",
                                                     Quote(std::string(1, c)), "'"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateAttributeKey(absl::string_view key) {
  if (key.empty() || key.size() > 253) return absl::InvalidArgumentError("attribute name must be 1-253 characters");
  for (char c : key) {
    if (!(absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '/')) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute name '", Quote(key), "' has the character '", Quote(std::string(1, c)), "'"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateResourceName(absl::string_view name) {
  if (name.empty() || name.size() > 63) return absl::InvalidArgumentError("resource name must be 1-63 characters");
  for (char c : name) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-' || c == '_' || c == '.' || c == '/')) {
      return absl::InvalidArgumentError(
          absl::StrCat("resource name '", Quote(name), "' has the character '", Quote(std::string(1, c)), "'"));
    }
  }
  return absl::OkStatus();
}

std::string JobId(absl::string_view user, absl::string_view name) { return absl::StrCat(user, "/", name); }

std::string TaskName(absl::string_view job_id, int32_t index) { return absl::StrCat(job_id, "/", index); }

std::string RunId(absl::string_view job_id, int32_t index, int64_t incarnation) {
  std::string id = absl::StrCat(job_id, ".", index, ".", incarnation);
  for (char& c : id) {
    if (c == '/') c = '.';
  }
  return id;
}

absl::StatusOr<JobRef> ParseJobRef(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, '/');
  JobRef ref;
  if (parts.size() == 1) {
    ref.name = std::string(parts[0]);
  } else if (parts.size() == 2) {
    ref.user = std::string(parts[0]);
    ref.name = std::string(parts[1]);
    if (auto st = ValidateUserName(ref.user); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("bad job '", text, "': ", st.message()));
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat("bad job '", text, "': use NAME or USER/NAME"));
  }
  if (auto st = ValidateJobName(ref.name); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("bad job '", text, "': ", st.message()));
  }
  return ref;
}

absl::StatusOr<TaskRefText> ParseTaskRef(absl::string_view text) {
  size_t slash = text.rfind('/');
  int32_t index = 0;
  if (slash == absl::string_view::npos || !absl::SimpleAtoi(text.substr(slash + 1), &index) || index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad task '", text, "': use JOB/INDEX, e.g. hello/0 or alice/hello/0"));
  }
  auto job = ParseJobRef(text.substr(0, slash));
  if (!job.ok()) return job.status();
  return TaskRefText{*job, index};
}

}  // namespace herd
