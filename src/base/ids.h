// Names and identifiers: jobs are "user/name", tasks "user/name/index", and an
// agent's run of one placement "<user>.<name>.<index>.<incarnation>".
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace herd {

// Untrusted text as it may appear in a message: printable ASCII kept, other
// bytes (a broken UTF-8 sequence, a control character) as \xNN, and at
// most `max` characters of it, then "...(N bytes)". Messages echo what a
// user sent; they must neither carry a 10 KB name whole nor break a
// terminal.
std::string Quote(absl::string_view text, size_t max = 64);

// Job and user names: 1-63 characters of [a-z0-9_.-], starting with a
// letter (so "name/3" is never ambiguous), not ending in '.' or '-'.
absl::Status ValidateJobName(absl::string_view name);
absl::Status ValidateUserName(absl::string_view name);
// Machine names: 1-253 characters of [A-Za-z0-9_.:-].
absl::Status ValidateMachineName(absl::string_view name);
// Attribute keys: [A-Za-z0-9_./-]+; extended resource names [a-z0-9_./-]+.
absl::Status ValidateAttributeKey(absl::string_view key);
absl::Status ValidateResourceName(absl::string_view name);

std::string JobId(absl::string_view user, absl::string_view name);
std::string TaskName(absl::string_view job_id, int32_t index);
std::string RunId(absl::string_view job_id, int32_t index, int64_t incarnation);

// A job reference as typed by a user: "name" or "user/name".
struct JobRef {
  std::string user;  // empty if not given
  std::string name;
  std::string Id() const { return JobId(user, name); }
};
absl::StatusOr<JobRef> ParseJobRef(absl::string_view text);

// A task reference: "name/index" or "user/name/index".
struct TaskRefText {
  JobRef job;
  int32_t index = 0;
};
absl::StatusOr<TaskRefText> ParseTaskRef(absl::string_view text);

}  // namespace herd
