// String building for messages. Debian's Abseil is built with its own absl::string_view
// (ABSL_OPTION_USE_STD_STRING_VIEW 0), so absl::StrCat does not take std::string_view; Cat does.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>

#include "absl/strings/str_cat.h"

namespace tae::spec {

inline void AppendPiece(std::string* out, std::string_view piece) { out->append(piece); }

template <typename T, std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, char> &&
                                           !std::is_same_v<T, bool>,
                                       int> = 0>
void AppendPiece(std::string* out, T number) {
  out->append(absl::StrCat(number));
}

// Concatenates strings, string_views, C strings and numbers (doubles as absl::StrCat: %.6g).
template <typename... Args>
std::string Cat(const Args&... args) {
  std::string out;
  (AppendPiece(&out, args), ...);
  return out;
}

// `text` without leading and trailing ASCII whitespace.
inline std::string_view StripWhitespace(std::string_view text) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  size_t begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) {
    return {};
  }
  size_t end = text.find_last_not_of(kSpace);
  return text.substr(begin, end - begin + 1);
}

}  // namespace tae::spec
