#include "common/cli/flags.h"

#include <catch2/catch.hpp>

namespace tae::cli {

TEST_CASE("flags: values, booleans, repeats, positionals and --") {
  std::string name;
  int64_t count = 1;
  bool wait = false;
  std::vector<std::string> sets;
  FlagSet flags("usage");
  flags.String("name", &name, "");
  flags.Int("count", &count, "");
  flags.Bool("wait", &wait, "");
  flags.Repeated("set", &sets, "");
  std::vector<std::string> positional;
  REQUIRE(flags
              .Parse({"file.toml", "--name", "x", "--count=3", "--wait", "--set", "a=1",
                      "--set=b=2", "--", "--not-a-flag"},
                     &positional)
              .ok());
  CHECK(name == "x");
  CHECK(count == 3);
  CHECK(wait);
  CHECK(sets == std::vector<std::string>{"a=1", "b=2"});
  CHECK(positional == std::vector<std::string>{"file.toml", "--not-a-flag"});
}

TEST_CASE("flags: errors name the flag") {
  int64_t count = 0;
  FlagSet flags("usage");
  flags.Int("count", &count, "");
  std::vector<std::string> positional;
  CHECK(flags.Parse({"--cout", "3"}, &positional).message() == "unknown flag --cout (see --help)");
  CHECK(flags.Parse({"--count", "three"}, &positional).message() ==
        "--count: 'three' is not an integer");
  CHECK(flags.Parse({"--count"}, &positional).message() == "--count needs a value");
}

}  // namespace tae::cli
