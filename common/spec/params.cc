#include "common/spec/params.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "common/spec/text.h"

namespace tae::spec {
namespace {

bool IsParamNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

}  // namespace

std::optional<Problem> ParamSchema::Declare(const std::string& full, const toml::key& key,
                                            const toml::node& node) {
  const std::string_view name = std::string_view(full).substr(kParamsTable.size() + 1);
  size_t begin = 0;
  while (begin <= name.size()) {
    const size_t dot = std::min(name.find('.', begin), name.size());
    const std::string_view part = name.substr(begin, dot - begin);
    begin = dot + 1;
    if (part.empty() || !std::all_of(part.begin(), part.end(), IsParamNameChar)) {
      return Problem{key.source().begin,
                     Cat(full,
                         ": a param name is letters, digits, '_' and '-' (it becomes a "
                         "command-line flag)")};
    }
  }
  KeyInfo info;
  info.scope = KeyScope::kRun;
  info.doc = "declared in [params]";
  switch (node.type()) {
    case toml::node_type::integer:
      info.type = ValueType::kInt;
      break;
    case toml::node_type::floating_point:
      info.type = ValueType::kFloat;
      break;
    case toml::node_type::boolean:
      info.type = ValueType::kBool;
      break;
    case toml::node_type::string:
      info.type = ValueType::kString;
      break;
    case toml::node_type::array:
      info.type = ValueType::kScalarArray;
      break;
    default:
      return Problem{node.source().begin,
                     Cat(full, ": a param is an integer, float, boolean, string or array, got ",
                         TypeName(node.type()))};
  }
  names_.push_back(full);
  info.name = names_.back();
  nlohmann::json value;
  if (std::optional<Problem> problem = ConvertValue(info, info.name, node, &value)) {
    names_.pop_back();
    return problem;
  }
  defaults_.push_back(value.dump());
  info.default_json = defaults_.back();
  keys_.push_back(info);
  return std::nullopt;
}

const KeyInfo* ParamSchema::Find(std::string_view full) const {
  for (const KeyInfo& key : keys_) {
    if (key.name == full) {
      return &key;
    }
  }
  return nullptr;
}

bool ParamSchema::IsGroup(std::string_view full) const {
  if (full == kParamsTable) {
    return true;
  }
  for (const KeyInfo& key : keys_) {
    if (key.name.size() > full.size() && key.name.substr(0, full.size()) == full &&
        key.name[full.size()] == '.') {
      return true;
    }
  }
  return false;
}

std::vector<std::string_view> ParamSchema::Names() const {
  std::vector<std::string_view> names;
  for (const KeyInfo& key : keys_) {
    names.push_back(key.name);
  }
  return names;
}

const KeyInfo* FindKeyOrParam(std::string_view name, const ParamSchema* params) {
  const KeyInfo* key = FindKey(name);
  return key != nullptr || params == nullptr ? key : params->Find(name);
}

std::vector<std::string_view> WithParams(std::vector<std::string_view> names,
                                         const ParamSchema* params) {
  if (params != nullptr) {
    for (std::string_view name : params->Names()) {
      names.push_back(name);
    }
  }
  return names;
}

}  // namespace tae::spec
