#pragma once

// One numbered schema migration: migrations/NNNN_name.sql, embedded at build time.

#include <vector>

namespace tae::store {

struct Migration {
  int version;
  const char* name;
  const char* sql;
};

// The migrations compiled into this binary, in version order.
const std::vector<Migration>& EmbeddedMigrations();

}  // namespace tae::store
