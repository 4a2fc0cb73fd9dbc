// absl::Status helpers. Herd uses absl::Status / absl::StatusOr everywhere
// (its codes map 1:1 to gRPC) and no exceptions.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define HERD_STATUS_CONCAT_INNER(a, b) a##b
#define HERD_STATUS_CONCAT(a, b) HERD_STATUS_CONCAT_INNER(a, b)

#define HERD_RETURN_IF_ERROR(expr)          \
  do {                                      \
    ::absl::Status _herd_st = (expr);       \
    if (!_herd_st.ok()) return _herd_st;    \
  } while (0)

#define HERD_ASSIGN_OR_RETURN(lhs, expr) \
  HERD_ASSIGN_OR_RETURN_IMPL(HERD_STATUS_CONCAT(_herd_sor_, __LINE__), lhs, expr)
#define HERD_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
