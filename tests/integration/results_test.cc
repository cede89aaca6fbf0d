// A grid study through the real binaries, then everything that reads its results: submit
// --dry-run, report at each grid point, plot (SVG), export (CSV, JSON) and TensorBoard event
// files read back with our reader. Every number checked comes from the metrics table.

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "common/tensorboard/tensorboard.h"
#include "server/store/db.h"
#include "tests/integration/harness.h"

namespace tae::testing {
namespace {

constexpr const char* kGridStudy = R"(name = "grid"
[model]
layers = 1
d_model = 16
heads = 2
[train]
steps = 40
eval_every = 20
warmup = 5
seeds = [0, 1]
[[ablation]]
name = "no-attn"
"model.drop_attention_layers" = [0]
[grid]
"train.lr" = [0.003, 0.01]
)";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// (run, metric, step) -> value, straight from taed's database.
std::map<std::tuple<int64_t, std::string, int64_t>, double> StoredPoints(
    const std::string& db_path) {
  auto db = store::Db::Open(db_path);
  REQUIRE(db.ok());
  auto stmt = db->Prepare(
      "SELECT m.run_id, k.name, m.step, m.value FROM metrics m JOIN metric_keys k ON "
      "k.id = m.key_id");
  REQUIRE(stmt.ok());
  std::map<std::tuple<int64_t, std::string, int64_t>, double> points;
  while (*stmt->Step()) {
    points[{stmt->Int(0), stmt->Text(1), stmt->Int(2)}] = stmt->Double(3);
  }
  return points;
}

TEST_CASE("submit --dry-run prints the grid x variants x seeds table and submits nothing") {
  TempDir dir;
  std::string spec = dir.Write("grid.toml", kGridStudy);
  // No taed on this home: a dry run must not need one.
  CommandResult dry =
      RunCommand({BinPath("taectl"), "--home", dir.path() + "/home", "submit", spec, "--dry-run"});
  INFO(dry.err);
  REQUIRE(dry.exit_code == 0);
  CHECK(dry.out.find("8 runs: 2 variants x 2 grid points x 2 seeds") != std::string::npos);
  CHECK(dry.out.find("no-attn[lr=0.01]") != std::string::npos);
  CHECK(dry.out.find("model.drop_attention_layers=[0]") != std::string::npos);
  CommandResult json = RunCommand(
      {BinPath("taectl"), "--home", dir.path() + "/home", "submit", spec, "--dry-run", "--json"});
  REQUIRE(json.exit_code == 0);
  nlohmann::json runs = nlohmann::json::parse(json.out);
  REQUIRE(runs.size() == 8);
  CHECK(runs[5].at("variant") == "baseline[lr=0.01]");
  CHECK(runs[5].at("seed") == 1);
  CHECK(runs[5].at("config").at("train.lr") == 0.01);
}

TEST_CASE("a grid study's report, plot and exports agree with the stored points") {
  Cluster cluster(1, 2);
  std::string spec = cluster.dir().Write("grid.toml", kGridStudy);
  nlohmann::json submitted = cluster.TaectlJson({"submit", spec});
  const std::string exp = std::to_string(submitted.at("experiment").get<int64_t>());
  CommandResult wait = cluster.Taectl({"wait", exp}, 600);
  INFO(wait.err);
  REQUIRE(wait.exit_code == 0);

  nlohmann::json runs = cluster.TaectlJson({"runs", exp});
  REQUIRE(runs.size() == 8);
  const auto points = StoredPoints(cluster.db_path());

  {  // report: each variant against the baseline at its own grid point
    nlohmann::json report = cluster.TaectlJson({"report", exp, "--metric", "eval/loss"});
    std::map<std::string, double> mean;
    for (const auto& row : report.at("rows")) {
      mean[row.at("variant")] = row.at("metrics").at("eval/loss").at("mean").get<double>();
    }
    for (const auto& row : report.at("rows")) {
      const std::string variant = row.at("variant");
      const auto& cell = row.at("metrics").at("eval/loss");
      const std::string base = "baseline" + variant.substr(variant.find('['));
      CHECK(cell.at("delta").get<double>() == Approx(mean[variant] - mean[base]));
    }
  }

  {  // report --pivot and --format csv render the same runs
    CommandResult pivot =
        cluster.Taectl({"report", exp, "--pivot", "variant×train.lr", "--format", "csv"});
    INFO(pivot.err);
    REQUIRE(pivot.exit_code == 0);
    CHECK(pivot.out.find("variant \\ train.lr,0.003,0.01\n") == 0);
    CHECK(pivot.out.find("\nbaseline,") != std::string::npos);
    CHECK(pivot.out.find("\nno-attn,") != std::string::npos);
    CHECK(pivot.out.find("(2)") != std::string::npos);  // two seeds per cell
    CommandResult csv = cluster.Taectl({"report", exp, "--format", "csv"});
    REQUIRE(csv.exit_code == 0);
    CHECK(csv.out.find("variant,baseline,runs,runs_total,eval/loss:n,") == 0);
    CHECK(csv.out.find("\nno-attn[lr=0.01],baseline[lr=0.01],2,2,2,") != std::string::npos);
  }

  {  // plot: an SVG with one line per variant
    const std::string svg_path = cluster.dir().path() + "/curves.svg";
    CommandResult plot = cluster.Taectl({"plot", exp, "-o", svg_path});
    INFO(plot.err);
    REQUIRE(plot.exit_code == 0);
    const std::string svg = ReadAll(svg_path);
    CHECK(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\"") != std::string::npos);
    CHECK(svg.find("</svg>") != std::string::npos);
    for (const char* name :
         {"baseline[lr=0.003]", "baseline[lr=0.01]", "no-attn[lr=0.003]", "no-attn[lr=0.01]"}) {
      CHECK(svg.find(name) != std::string::npos);
    }
    CommandResult bad = cluster.Taectl({"plot", exp, "--metric", "eval/lss", "-o", svg_path});
    CHECK(bad.exit_code != 0);
    CHECK(bad.err.find("no points of 'eval/lss'") != std::string::npos);
    CHECK(bad.err.find("eval/loss") != std::string::npos);  // says which metrics exist
  }

  {  // export csv: every stored point exactly once
    CommandResult csv = cluster.Taectl({"export", exp});
    INFO(csv.err);
    REQUIRE(csv.exit_code == 0);
    std::istringstream lines(csv.out);
    std::string line;
    std::getline(lines, line);
    CHECK(line == "run,variant,seed,metric,step,value,wall_time");
    std::map<std::tuple<int64_t, std::string, int64_t>, double> exported;
    while (std::getline(lines, line)) {
      std::vector<std::string> f;
      std::stringstream fields(line);
      for (std::string x; std::getline(fields, x, ',');) {
        f.push_back(x);
      }
      REQUIRE(f.size() == 7);
      auto key = std::make_tuple(std::stoll(f[0]), f[3], std::stoll(f[4]));
      CHECK(exported.count(key) == 0);
      exported[key] = std::stod(f[5]);
    }
    CHECK(exported == points);
  }

  {  // export json and tensorboard: the same points, read back
    const std::string json_path = cluster.dir().path() + "/points.json";
    REQUIRE(
        cluster
            .Taectl({"export", exp, "--format", "json", "--metric", "eval/loss", "-o", json_path})
            .exit_code == 0);
    nlohmann::json series = nlohmann::json::parse(ReadAll(json_path));
    REQUIRE(series.size() == 8);  // one eval/loss series per run
    for (const auto& s : series) {
      CHECK(s.at("metric") == "eval/loss");
      for (size_t i = 0; i < s.at("steps").size(); ++i) {
        CHECK(s.at("values")[i].get<double>() == points.at({s.at("run").get<int64_t>(), "eval/loss",
                                                            s.at("steps")[i].get<int64_t>()}));
      }
    }

    const std::string tb = cluster.dir().path() + "/tb";
    CommandResult exported = cluster.Taectl({"export", exp, "--tensorboard", tb});
    INFO(exported.err);
    REQUIRE(exported.exit_code == 0);
    size_t read_points = 0;
    for (const auto& run : runs) {
      const int64_t id = run.at("id").get<int64_t>();
      const std::string run_dir = tb + "/r" + std::to_string(id) + "-" +
                                  run.at("variant").get<std::string>() + "-s" +
                                  std::to_string(run.at("seed").get<int64_t>());
      std::vector<std::string> files;
      for (const auto& entry : std::filesystem::directory_iterator(run_dir)) {
        files.push_back(entry.path());
      }
      REQUIRE(files.size() == 1);
      CHECK(files[0].find("events.out.tfevents.") != std::string::npos);
      auto scalars = tensorboard::ReadEventFile(files[0]);
      REQUIRE(scalars.ok());
      for (const tensorboard::Scalar& s : *scalars) {
        // Event files hold floats.
        CHECK(s.value == Approx(points.at({id, s.tag, s.step})).epsilon(1e-6));
        ++read_points;
      }
    }
    CHECK(read_points == points.size());
    // A second export into the same directory is refused rather than doubling the curves.
    CHECK(cluster.Taectl({"export", exp, "--tensorboard", tb}).exit_code != 0);
  }
}

}  // namespace
}  // namespace tae::testing
