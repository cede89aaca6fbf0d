// The dashboard's varying keys (server/http/views.h): the config keys that tell variants apart.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "server/http/views.h"

namespace tae::http {
namespace {

query::RunView Run(const std::string& variant, int64_t seed, const nlohmann::json& config) {
  query::RunView view;
  view.run.variant = variant;
  view.run.seed = seed;
  nlohmann::json with_seed = config;
  with_seed["train.seed"] = seed;
  view.run.config_json = with_seed.dump();
  return view;
}

nlohmann::json Keys(const nlohmann::ordered_json& varying, const std::string& variant) {
  nlohmann::json keys = nlohmann::json::array();
  for (const auto& [key, value] : varying.at(variant).items()) {
    keys.push_back(key);
  }
  return keys;
}

TEST_CASE("a command expanded from its template is not a varying key of its own", "[http]") {
  // job.command = "python3 sweep.py {train.lr} {params.offset}" over a grid of lr and an ablation.
  const auto config = [](double lr, double offset, const std::string& command) {
    return nlohmann::json{{"train.lr", lr}, {"params.offset", offset}, {"job.command", command}};
  };
  const std::vector<query::RunView> runs = {
      Run("baseline[lr=0.01]", 0, config(0.01, 0, "python3 sweep.py 0.01 0")),
      Run("baseline[lr=0.1]", 0, config(0.1, 0, "python3 sweep.py 0.1 0")),
      Run("worse[lr=0.01]", 0, config(0.01, 0.5, "python3 sweep.py 0.01 0.5")),
      Run("worse[lr=0.1]", 0, config(0.1, 0.5, "python3 sweep.py 0.1 0.5"))};
  const nlohmann::ordered_json varying = VaryingKeys(runs);
  CHECK(Keys(varying, "baseline[lr=0.1]") == nlohmann::json{"params.offset", "train.lr"});
  CHECK(varying.at("worse[lr=0.01]").at("params.offset") == 0.5);
}

TEST_CASE("a command an ablation changes is a varying key", "[http]") {
  const std::vector<query::RunView> runs = {
      Run("baseline[lr=0.01]", 0, {{"train.lr", 0.01}, {"job.command", "python3 a.py"}}),
      Run("baseline[lr=0.1]", 0, {{"train.lr", 0.1}, {"job.command", "python3 a.py"}}),
      Run("other[lr=0.01]", 0, {{"train.lr", 0.01}, {"job.command", "python3 b.py"}}),
      Run("other[lr=0.1]", 0, {{"train.lr", 0.1}, {"job.command", "python3 b.py"}})};
  const nlohmann::ordered_json varying = VaryingKeys(runs);
  CHECK(Keys(varying, "other[lr=0.1]") == nlohmann::json{"job.command", "train.lr"});
  // The only varying key is kept even though it is trivially a function of the others.
  const std::vector<query::RunView> alone = {Run("baseline", 0, {{"job.command", "python3 a.py"}}),
                                             Run("other", 0, {{"job.command", "python3 b.py"}})};
  CHECK(Keys(VaryingKeys(alone), "other") == nlohmann::json{"job.command"});
}

}  // namespace
}  // namespace tae::http
