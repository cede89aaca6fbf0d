#pragma once

// A small explicit command-line parser shared by the three programs: `--name value`,
// `--name=value`, boolean `--name`, repeated flags, positional arguments and `--` (everything
// after it is positional). Unknown flags are errors that name the flag.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tae::cli {

class FlagSet {
 public:
  explicit FlagSet(std::string usage);

  void String(std::string name, std::string* dest, std::string help);
  // A file or directory: stored absolute (AbsolutePath, common/cli/paths.h), so whatever this
  // program hands it to sees the file the user named.
  void Path(std::string name, std::string* dest, std::string help);
  void Int(std::string name, int64_t* dest, std::string help);
  void Int(std::string name, int* dest, std::string help);
  void Double(std::string name, double* dest, std::string help);
  void Bool(std::string name, bool* dest, std::string help);  // takes no value
  void Repeated(std::string name, std::vector<std::string>* dest, std::string help);

  // Parses args (without the program / command name). Positional arguments go to *positional.
  // Sets help_requested() on -h/--help instead of failing.
  absl::Status Parse(const std::vector<std::string>& args, std::vector<std::string>* positional);

  bool help_requested() const { return help_requested_; }
  std::string Help() const;

 private:
  struct Flag {
    std::string name;
    std::string help;
    std::string default_text;
    bool takes_value = true;
    std::function<absl::Status(const std::string&)> set;
  };
  const Flag* Find(const std::string& name) const;

  std::string usage_;
  std::vector<Flag> flags_;
  bool help_requested_ = false;
};

// Reads environment variable `name`, or returns fallback when unset or empty.
std::string EnvOr(const char* name, std::string fallback);

}  // namespace tae::cli
