#include "common/cli/flags.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "common/cli/paths.h"

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

namespace tae::cli {

TEST_CASE("paths: a path from a user or the environment is made absolute where it enters") {
  const std::string cwd = std::filesystem::current_path().string();
  CHECK(AbsolutePath("relhome") == cwd + "/relhome");
  CHECK(AbsolutePath("./relhome/") == cwd + "/relhome");
  CHECK(AbsolutePath("a/./b//c") == cwd + "/a/b/c");
  CHECK(AbsolutePath("../up") == cwd + "/../up");  // ".." is the kernel's (symlinks)
  CHECK(AbsolutePath("/abs//dir/.") == "/abs/dir");
  CHECK(AbsolutePath("/") == "/");
  CHECK(AbsolutePath(".") == cwd);
  CHECK(AbsolutePath("").empty());

  // The flags of paths store them absolute; the environment's TAE_HOME is read so too.
  std::string home;
  std::string name;
  FlagSet flags("usage");
  flags.Path("home", &home, "data dir");
  flags.String("name", &name, "a name, not a path");
  std::vector<std::string> rest;
  REQUIRE(flags.Parse({"--home", "rel", "--name", "rel"}, &rest).ok());
  CHECK(home == cwd + "/rel");
  CHECK(name == "rel");
  const char* saved = getenv("TAE_HOME");
  const std::string saved_value = saved != nullptr ? saved : "";
  setenv("TAE_HOME", "rel/home", 1);
  CHECK(TaeHome() == cwd + "/rel/home");
  if (saved != nullptr) {
    setenv("TAE_HOME", saved_value.c_str(), 1);
  } else {
    unsetenv("TAE_HOME");
  }
}

}  // namespace tae::cli
