// taectl doctor through the real binaries: with taed and a local agent up it reports the agent
// and the machine facts the agent sent at Register, and exits 0; on a home where no taed runs it
// exits 1 and names the problem with its fix.

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "tests/integration/harness.h"

namespace tae::testing {
namespace {

std::string TaectlVersion() {
  CommandResult version = RunCommand({BinPath("taectl"), "--version"}, 30);
  REQUIRE(version.exit_code == 0);
  absl::string_view text = absl::StripAsciiWhitespace(version.out);
  REQUIRE(absl::ConsumePrefix(&text, "taectl "));
  return std::string(text);
}

const nlohmann::json* FindGroup(const nlohmann::json& doc, const std::string& name) {
  for (const nlohmann::json& group : doc.at("groups")) {
    if (group.at("name") == name) {
      return &group;
    }
  }
  return nullptr;
}

TEST_CASE("doctor reports each agent with the facts it registered with") {
  Cluster cluster(1, 1);
  const std::string version = TaectlVersion();
  nlohmann::json doc;
  const nlohmann::json* agent = nullptr;
  // `taectl up` returns once the agent is connected; poll anyway, as the listing is eventual.
  REQUIRE(WaitUntil(
      [&] {
        doc = cluster.TaectlJson({"doctor"});
        for (const nlohmann::json& group : doc.at("groups")) {
          if (absl::StartsWith(group.at("name").get<std::string>(), "agent ")) {
            agent = &group;
            return true;
          }
        }
        return false;
      },
      30));
  INFO(doc.dump(2));
  CHECK(doc.at("ok") == true);
  const nlohmann::json& facts = agent->at("detail").at("facts");
  CHECK(facts.at("version") == version);
  CHECK(agent->at("detail").at("version") == version);
  CHECK(facts.at("cpu_count").get<int>() > 0);
  REQUIRE(facts.at("dirs").size() >= 1);
  CHECK(facts.at("dirs")[0].at("free_bytes").get<uint64_t>() > 0);
  for (const nlohmann::json& check : agent->at("checks")) {
    CHECK(check.at("level") != "FAIL");
  }
  const nlohmann::json* machine = FindGroup(doc, "this machine");
  REQUIRE(machine != nullptr);
  CHECK(machine->at("detail").at("taed_reachable") == true);
  CHECK(machine->at("detail").at("taectl_version") == version);

  CommandResult text = cluster.Taectl({"doctor"});
  INFO(text.out << text.err);
  CHECK(text.exit_code == 0);
  CHECK(absl::StrContains(text.out, "this machine\n"));
  CHECK(absl::StrContains(text.out, "  ok    taed answers on "));
}

TEST_CASE("doctor exits 1 and says how to start taed when none runs on the home") {
  TempDir home;
  CommandResult result =
      RunCommand({BinPath("taectl"), "--home", home.path(), "doctor", "--json"}, 60);
  INFO(result.out << result.err);
  CHECK(result.exit_code == 1);
  nlohmann::json doc = nlohmann::json::parse(result.out, nullptr, false);
  REQUIRE_FALSE(doc.is_discarded());
  CHECK(doc.at("ok") == false);
  const nlohmann::json* machine = FindGroup(doc, "this machine");
  REQUIRE(machine != nullptr);
  bool named = false;
  for (const nlohmann::json& check : machine->at("checks")) {
    if (check.at("level") == "FAIL" &&
        check.at("what") == "taed is not running on " + home.path()) {
      named = true;
      CHECK(check.at("fix") == "taectl --home " + home.path() + " up");
    }
  }
  CHECK(named);
  CHECK(doc.at("groups").size() == 1);  // no taed, no agents to list

  CommandResult text = RunCommand({BinPath("taectl"), "--home", home.path(), "doctor"}, 60);
  CHECK(text.exit_code == 1);
  CHECK(absl::StrContains(text.out, "  FAIL  taed is not running on " + home.path()));
  CHECK(absl::StrContains(text.out, "        fix: taectl --home " + home.path() + " up"));
}

}  // namespace
}  // namespace tae::testing
