#pragma once

// Byte counts for people.

#include <cstdint>
#include <string>

namespace tae::text {

// "1.5 MB", "12 B" (decimal units, like du --si).
std::string FormatBytes(uint64_t bytes);

}  // namespace tae::text
