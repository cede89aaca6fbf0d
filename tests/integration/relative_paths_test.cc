// Paths users give relative to where they stand: taed started with a relative TAE_HOME from one
// directory serves taectl from another, because every path is made absolute where it enters and
// every child gets the absolute form. And a start fault that repeats is stopped with its cause.

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/process/spawn.h"
#include "tests/integration/harness.h"

namespace tae::testing {
namespace {

// taectl ARGS run in `cwd` with TAE_HOME = `home` exactly as given (relative or not) and `env`.
CommandResult TaectlIn(const std::string& cwd, const std::string& home,
                       std::vector<std::string> args,
                       std::vector<std::pair<std::string, std::string>> env = {},
                       double timeout_s = 120) {
  process::SpawnRequest request;
  request.argv = {BinPath("taectl")};
  request.argv.insert(request.argv.end(), args.begin(), args.end());
  request.cwd = cwd;
  request.env = std::move(env);
  request.env.emplace_back("TAE_HOME", home);
  return RunCommand(request, timeout_s);
}

// Stops the taed on `home` (absolute) however the test ends.
struct Down {
  std::string home;
  ~Down() { RunCommand({BinPath("taectl"), "--home", home, "down"}, 60); }
};

nlohmann::json Json(const CommandResult& result) {
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  nlohmann::json doc = nlohmann::json::parse(result.out, nullptr, false);
  REQUIRE_FALSE(doc.is_discarded());
  return doc;
}

constexpr char kStudy[] = R"(name = "relative"
[train]
seeds = [0, 1]
[job]
code = "src"
command = "sh job.sh {train.seed}"
)";

}  // namespace

TEST_CASE("a relative TAE_HOME: taed up from one directory, a study from another, runs succeed") {
  TempDir base;
  const std::string up_dir = base.path() + "/lab";
  const std::string user_dir = base.path() + "/user";
  std::filesystem::create_directories(up_dir);
  std::filesystem::create_directories(user_dir + "/study/src");
  const std::string home = up_dir + "/relhome";  // what "relhome" means in up_dir
  Down down{home};

  CommandResult up = TaectlIn(up_dir, "relhome", {"up", "--agents", "1", "--slots", "2"});
  INFO(up.out << up.err);
  REQUIRE(up.exit_code == 0);
  CHECK(up.out.find("data in " + home) != std::string::npos);
  // taed's children got the absolute form: the agent's work dir is under the home up_dir meant.
  CHECK(FindProcess("tae-agent", "--work-dir " + home + "/agents/local-0") != 0);

  // The issue's example: a command in a directory, from elsewhere, TAE_HOME relative to there.
  std::ofstream(user_dir + "/study/src/job.sh")
      << "echo \"hello $1\"\necho \"score=$(( $1 + 1 ))\"\n";
  CommandResult run =
      TaectlIn(user_dir, "../lab/relhome", {"run", "study/src", "--", "sh", "-c", "echo hello"});
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(run.out.find("hello") != std::string::npos);

  // A study whose spec path and [job] code are relative to user_dir.
  std::ofstream(user_dir + "/study/relative.toml") << kStudy;
  const nlohmann::json submitted =
      Json(TaectlIn(user_dir, "../lab/relhome", {"submit", "study/relative.toml", "--json"}));
  const std::string exp = std::to_string(submitted.at("experiment").get<int64_t>());
  CommandResult waited =
      TaectlIn(user_dir, "../lab/relhome", {"wait", exp, "--timeout", "120"}, {}, 150);
  INFO(waited.out << waited.err);
  REQUIRE(waited.exit_code == 0);
  const nlohmann::json runs = Json(TaectlIn(user_dir, "../lab/relhome", {"runs", exp, "--json"}));
  REQUIRE(runs.size() == 2);
  for (const auto& r : runs) {
    CHECK(r.at("state") == "succeeded");
    CHECK(r.at("attempt") == 1);
  }
  const nlohmann::json shown =
      Json(TaectlIn(user_dir, "../lab/relhome", {"show", "e" + exp, "--json"}));
  CHECK(shown.dump().find(user_dir + "/study/relative.toml") != std::string::npos);
}

TEST_CASE("a start fault that repeats on an agent fails the run early, with its cause") {
  TempDir base;
  const std::string home = base.path() + "/home";
  Down down{home};
  // Every supervisor this agent starts fails before its job runs: tae-job is not there.
  const std::string missing = base.path() + "/no-such-tae-job";
  CommandResult up = TaectlIn(base.path(), home, {"up", "--agents", "1", "--slots", "1"},
                              {{"TAE_JOB_BINARY", missing}});
  INFO(up.out << up.err);
  REQUIRE(up.exit_code == 0);

  std::filesystem::create_directories(base.path() + "/study/src");
  std::ofstream(base.path() + "/study/src/job.sh") << "echo ran\n";
  std::ofstream(base.path() + "/study/fault.toml")
      << "name = \"fault\"\n[train]\nseeds = [0]\n[job]\ncode = \"src\"\ncommand = \"sh job.sh\"\n";
  const nlohmann::json submitted =
      Json(TaectlIn(base.path(), home, {"submit", "study/fault.toml", "--json"}));
  const std::string exp = std::to_string(submitted.at("experiment").get<int64_t>());
  CommandResult waited = TaectlIn(base.path(), home, {"wait", exp, "--timeout", "60"}, {}, 90);
  INFO(waited.out << waited.err);

  const nlohmann::json runs = Json(TaectlIn(base.path(), home, {"runs", exp, "--json"}));
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].at("state") == "failed");
  CHECK(runs[0].at("attempt") == 2);  // not 20
  const std::string run_id = "r" + std::to_string(runs[0].at("id").get<int64_t>());
  const nlohmann::json shown = Json(TaectlIn(base.path(), home, {"show", run_id, "--json"}));
  const std::string text = shown.dump();
  INFO(text);
  CHECK(text.find("the same start fault on local-0 in 2 attempts in a row") != std::string::npos);
  CHECK(text.find("could not start the job: cannot execute " + missing) != std::string::npos);
  CHECK(text.find("died without recording its exit") == std::string::npos);

  // The agent that cannot start jobs takes no more.
  const nlohmann::json agents = Json(TaectlIn(base.path(), home, {"agents", "--json"}));
  REQUIRE(agents.size() == 1);
  CHECK(agents[0].dump().find("cannot execute") != std::string::npos);
}

}  // namespace tae::testing
