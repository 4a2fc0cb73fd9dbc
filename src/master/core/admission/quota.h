// Admission control (Borg §2.5): a job is admitted only if its user's quota
// in the job's priority band covers it. Quota is a resource vector per user
// per band, checked at submission (not scheduling); priority 0 is unlimited;
// a user with no quota in a band is unlimited there (an operator limits users
// with `herd quota set`). Rejections name the resource, what is asked and
// what is left.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "cell/cell_state.h"
#include "herd/v1/objects.pb.h"

namespace herd::master {

// RESOURCE_EXHAUSTED if admitting `jobs` (all at once) would put any user
// over quota in any band; OK otherwise. `replacing` are live jobs that
// `jobs` update: what their live tasks hold now is given back first, so an
// update asks only for what it adds (and shrinking never fails).
absl::Status CheckQuota(const cell::CellState& state, const std::vector<v1::JobSpec>& jobs,
                        const std::vector<const cell::Job*>& replacing = {});

// The dimensions a quota limits (see v1::Quota.limited).
std::vector<std::string> LimitedDimensions(const v1::Quota& q);

}  // namespace herd::master
