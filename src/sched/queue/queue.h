// The pending queue's order for one pass: priority from high to low and,
// within one priority, round-robin across users so a big job does not block
// the line (Borg paper §3.2). The user who goes first rotates with `turn`.
#pragma once

#include <cstdint>
#include <vector>

#include "cell/cell_state.h"

namespace herd::sched {

std::vector<const cell::Task*> OrderPending(const cell::CellState& state, uint64_t turn = 0);

}  // namespace herd::sched
