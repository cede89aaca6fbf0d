#pragma once

// UTF-8 for bytes that come from outside: a job's output, file names, dashboard parameters.
// Protobuf string fields and JSON need valid UTF-8, so text is checked (IsValidUtf8) or repaired
// (ToValidUtf8) where it enters, never thrown about later.

#include <cstddef>
#include <string>
#include <string_view>

namespace tae::text {

// True if `bytes` is well-formed UTF-8 (no overlongs, surrogates or code points above U+10FFFF).
bool IsValidUtf8(std::string_view bytes);

// `bytes` with every byte that does not begin a well-formed sequence replaced by U+FFFD (EF BF
// BD); valid text comes back unchanged. A sequence cut off at the end (a line truncated inside a
// character) is replaced too.
std::string ToValidUtf8(std::string_view bytes);

// ToValidUtf8(bytes) safe to print on a terminal: every control character (C0 but tab, DEL, C1:
// what starts an escape sequence) replaced by '?'. For text a peer supplied (an agent's labels
// and host, a cloud's words) that taectl prints as it is.
std::string ForTerminal(std::string_view bytes);

}  // namespace tae::text
