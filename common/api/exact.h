#pragma once

// What the columnar form (columns.h) and a pack's bounds (server/store/series_pack.h) both ask
// of a number to code it exactly. Header-only, no dependencies.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace tae::api {

// How far a difference between two 64-bit values (taken in wrapping arithmetic, read as signed)
// is from 0: d for d >= 0, -d - 1 for d < 0. It fits a signed w-byte integer iff it is less
// than 2^(8w - 1).
inline uint64_t DeltaMagnitude(uint64_t delta) {
  const auto d = static_cast<int64_t>(delta);
  return d >= 0 ? static_cast<uint64_t>(d) : ~static_cast<uint64_t>(d);
}

// Whether the double is a float32 exactly, bit for bit (NaN payloads and -0.0 included).
inline bool IsFloat32(double v) {
  if (std::isfinite(v) && std::fabs(v) > std::numeric_limits<float>::max()) {
    return false;  // out of float's range (a conversion there is undefined)
  }
  const double back = static_cast<float>(v);
  return std::memcmp(&back, &v, sizeof v) == 0;
}

}  // namespace tae::api
