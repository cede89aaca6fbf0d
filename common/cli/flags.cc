#include "common/cli/flags.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/cli/paths.h"

namespace tae::cli {

FlagSet::FlagSet(std::string usage) : usage_(std::move(usage)) {}

void FlagSet::String(std::string name, std::string* dest, std::string help) {
  std::string def = dest->empty() ? "" : absl::StrCat("\"", *dest, "\"");
  flags_.push_back({std::move(name), std::move(help), def, true, [dest](const std::string& v) {
                      *dest = v;
                      return absl::OkStatus();
                    }});
}

void FlagSet::Path(std::string name, std::string* dest, std::string help) {
  std::string def = dest->empty() ? "" : absl::StrCat("\"", *dest, "\"");
  flags_.push_back({std::move(name), std::move(help), def, true, [dest](const std::string& v) {
                      *dest = AbsolutePath(v);
                      return absl::OkStatus();
                    }});
}

namespace {

// A setter that parses with parse(text, dest) and names the flag when the text is not a `what`.
template <typename T, typename Parse>
std::function<absl::Status(const std::string&)> Parser(std::string flag, T* dest, const char* what,
                                                       Parse parse) {
  return [flag = std::move(flag), dest, what, parse](const std::string& v) {
    if (!parse(v, dest)) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", v, "' is not ", what));
    }
    return absl::OkStatus();
  };
}

}  // namespace

void FlagSet::Int(std::string name, int64_t* dest, std::string help) {
  auto parse = [](const std::string& v, int64_t* d) { return absl::SimpleAtoi(v, d); };
  flags_.push_back(
      {name, std::move(help), absl::StrCat(*dest), true, Parser(name, dest, "an integer", parse)});
}

void FlagSet::Int(std::string name, int* dest, std::string help) {
  auto parse = [](const std::string& v, int* d) { return absl::SimpleAtoi(v, d); };
  flags_.push_back(
      {name, std::move(help), absl::StrCat(*dest), true, Parser(name, dest, "an integer", parse)});
}

void FlagSet::Double(std::string name, double* dest, std::string help) {
  auto parse = [](const std::string& v, double* d) { return absl::SimpleAtod(v, d); };
  flags_.push_back(
      {name, std::move(help), absl::StrCat(*dest), true, Parser(name, dest, "a number", parse)});
}

void FlagSet::Bool(std::string name, bool* dest, std::string help) {
  flags_.push_back({std::move(name), std::move(help), "", false, [dest](const std::string&) {
                      *dest = true;
                      return absl::OkStatus();
                    }});
}

void FlagSet::Repeated(std::string name, std::vector<std::string>* dest, std::string help) {
  flags_.push_back({std::move(name), std::move(help), "", true, [dest](const std::string& v) {
                      dest->push_back(v);
                      return absl::OkStatus();
                    }});
}

const FlagSet::Flag* FlagSet::Find(const std::string& name) const {
  for (const Flag& flag : flags_) {
    if (flag.name == name) {
      return &flag;
    }
  }
  return nullptr;
}

absl::Status FlagSet::Parse(const std::vector<std::string>& args,
                            std::vector<std::string>* positional) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      positional->insert(positional->end(), args.begin() + i + 1, args.end());
      break;
    }
    if (arg == "-h" || arg == "--help") {
      help_requested_ = true;
      continue;
    }
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      positional->push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    const Flag* flag = Find(name);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " (see --help)"));
    }
    if (flag->takes_value && !has_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
      value = args[++i];
    } else if (!flag->takes_value && has_value) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
    }
    if (absl::Status s = flag->set(value); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

std::string FlagSet::Help() const {
  std::string out = absl::StrCat(usage_, "\n");
  if (!flags_.empty()) {
    absl::StrAppend(&out, "\nFlags:\n");
  }
  for (const Flag& flag : flags_) {
    std::string left = absl::StrCat("  --", flag.name, flag.takes_value ? " VALUE" : "");
    if (left.size() < 26) {
      left.resize(26, ' ');
    } else {
      left += "  ";
    }
    absl::StrAppend(&out, left, flag.help);
    if (!flag.default_text.empty() && flag.default_text != "0") {
      absl::StrAppend(&out, " [", flag.default_text, "]");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

std::string EnvOr(const char* name, std::string fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    return fallback;
  }
  return value;
}

}  // namespace tae::cli
