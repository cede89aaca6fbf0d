// {resume:TEXT}: kept by the spec at submit, resolved by the agent at each attempt.
#include "agent/runner/resume.h"

#include <catch2/catch.hpp>
#include <string>

#include "common/spec/spec.h"
#include "tests/unit/spec_parse.h"

namespace tae::agent {
namespace {

TEST_CASE("{resume:TEXT} gives TEXT on a resumed attempt and nothing on a fresh one", "[resume]") {
  const std::string command =
      "python3 train.py --out_dir=$TAE_CHECKPOINT_DIR {resume:--init_from=resume}";
  CHECK(ResolveResume(command, true) ==
        "python3 train.py --out_dir=$TAE_CHECKPOINT_DIR --init_from=resume");
  CHECK(ResolveResume(command, false) == "python3 train.py --out_dir=$TAE_CHECKPOINT_DIR ");
  CHECK(ResolveResume("a {resume:x} b {resume:y z}", true) == "a x b y z");
  CHECK(ResolveResume("a {resume:x} b {resume:y z}", false) == "a  b ");
  CHECK(ResolveResume("{resume:}", true).empty());
  // Nothing else changes: other braces, an unclosed placeholder.
  CHECK(ResolveResume("awk '{print $1}' {resume:x", true) == "awk '{print $1}' {resume:x");
  CHECK(ResolveResume("plain", false) == "plain");
}

TEST_CASE("a spec keeps {resume:TEXT} in each run's command and refuses what it cannot mean",
          "[resume][spec]") {
  const std::string file =
      "name = \"r\"\n[train]\nseeds = [0, 1]\nlr = 0.01\n[job]\ncode = \".\"\ncommand = "
      "\"python3 train.py --lr={train.lr} {resume:--init_from=resume}\"\n";
  const spec::Spec spec = tae::spec::testing::MustParse(file);
  const std::vector<spec::RunPlan> runs = spec::ExpandRuns(spec);
  REQUIRE(runs.size() == 2);
  const std::string expanded = runs[0].config.at("job.command").get<std::string>();
  CHECK(expanded == "python3 train.py --lr=0.01 {resume:--init_from=resume}");
  CHECK(ResolveResume(expanded, true) == "python3 train.py --lr=0.01 --init_from=resume");
  CHECK(tae::spec::testing::ErrorOf("name = \"r\"\n[job]\ncode = \".\"\ncommand = "
                                    "\"t.py {resume:--lr={train.lr}\"\n")
            .find("without placeholders") != std::string::npos);
  CHECK(tae::spec::testing::ErrorOf(
            "name = \"r\"\n[job]\ncode = \".\"\ncommand = \"t.py {{resume:x}}\"\n")
            .find("cannot be written") != std::string::npos);
}

}  // namespace
}  // namespace tae::agent
