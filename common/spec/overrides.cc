#include "common/spec/overrides.h"

#include <toml++/toml.h>

#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "common/spec/params.h"
#include "common/spec/text.h"
#include "common/spec/value.h"

namespace tae::spec {
namespace {

constexpr std::string_view kValueKey = "v";

absl::Status SetError(std::string_view arg, std::string_view what) {
  return absl::InvalidArgumentError(Cat("--set ", arg, ": ", what));
}

// The document "v = TEXT" if TEXT is exactly one TOML value.
std::optional<toml::table> ParseTomlValue(std::string_view text) {
  try {
    toml::table table = toml::parse(Cat(kValueKey, " = ", text), std::string_view());
    if (table.size() == 1 && table.contains(kValueKey)) {
      return table;
    }
  } catch (const toml::parse_error&) {
    // Not TOML value syntax: the caller takes the text as a bare string.
  }
  return std::nullopt;
}

bool IsValidUtf8(const std::string& text) {
  try {
    (void)nlohmann::json(text).dump();
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  return true;
}

bool WantsString(const KeyInfo& key) {
  return key.type == ValueType::kString || key.type == ValueType::kEnum ||
         key.type == ValueType::kName || key.type == ValueType::kBytes;
}

std::vector<std::string_view> AllKeyNames() {
  std::vector<std::string_view> names;
  for (const KeyInfo& key : Schema()) {
    names.push_back(key.name);
  }
  return names;
}

// Converts TEXT for `key` into *out.
absl::Status ConvertText(std::string_view arg, const KeyInfo* key, std::string_view text,
                         nlohmann::json* out) {
  std::optional<toml::table> parsed = ParseTomlValue(text);
  const toml::node* node = parsed ? parsed->get(kValueKey) : nullptr;
  toml::value<std::string> bare{std::string(text)};
  if (node == nullptr || (WantsString(*key) && !node->is_string())) {
    if (!IsValidUtf8(bare.get())) {
      return SetError(arg, "the value is not valid UTF-8");
    }
    node = &bare;
  }
  std::optional<Problem> problem = ConvertValue(*key, key->name, *node, out);
  return problem ? SetError(arg, problem->what) : absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<SetOverride>> ParseOverrides(const std::vector<std::string>& args,
                                                        const ParamSchema* params) {
  std::vector<SetOverride> result;
  for (const std::string& arg : args) {
    size_t eq = arg.find('=');
    std::string_view name = eq == std::string::npos
                                ? std::string_view()
                                : StripWhitespace(std::string_view(arg).substr(0, eq));
    if (name.empty()) {
      return SetError(arg, "expected KEY=VALUE, e.g. --set model.layers=4");
    }
    std::string_view text = StripWhitespace(std::string_view(arg).substr(eq + 1));
    const KeyInfo* key = FindKeyOrParam(name, params);
    if (key == nullptr) {
      std::string hint = DidYouMean(name, WithParams(AllKeyNames(), params));
      if (hint.empty() &&
          absl::StartsWith(absl::string_view(name.data(), name.size()), "params.")) {
        hint = " (a param must be declared in the file's [params] first)";
      }
      return SetError(arg, Cat("unknown key '", name, "'", hint));
    }
    SetOverride set{arg, key, nullptr};
    if (absl::Status status = ConvertText(arg, key, text, &set.value); !status.ok()) {
      return status;
    }
    result.push_back(std::move(set));
  }
  return result;
}

}  // namespace tae::spec
