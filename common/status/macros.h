#pragma once

// Early-return helpers for absl::Status / absl::StatusOr, used at module boundaries.

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TAE_STATUS_CONCAT_INNER(a, b) a##b
#define TAE_STATUS_CONCAT(a, b) TAE_STATUS_CONCAT_INNER(a, b)

#define TAE_ASSIGN_OR_RETURN_IMPL(var, lhs, expr) \
  auto var = (expr);                              \
  if (!var.ok()) {                                \
    return var.status();                          \
  }                                               \
  lhs = std::move(*var)

// ASSIGN_OR_RETURN(T x, StatusOrExpr): declares x from the value or returns the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  TAE_ASSIGN_OR_RETURN_IMPL(TAE_STATUS_CONCAT(status_or_, __LINE__), lhs, expr)

#define RETURN_IF_ERROR(expr)                           \
  do {                                                  \
    if (absl::Status status_ = (expr); !status_.ok()) { \
      return status_;                                   \
    }                                                   \
  } while (0)
