// A command job reports as it already does (docs/metrics.md): [job.metrics] patterns over the
// lines it prints in its own format, and the TensorBoard event files it writes (job.tensorboard),
// each point stored once, also across a kill -9 of the agent while the writer is mid-record.
// Through the real binaries; the event files come from tests/tensorboard/slow_writer.py, which
// shares nothing with TAE.

#include <signal.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/tensorboard/tensorboard.h"
#include "tests/integration/harness.h"

namespace tae::testing {
namespace {

// (run id, metric) -> step -> the values stored, from `taectl export --format csv`.
std::map<std::pair<int64_t, std::string>, std::map<int64_t, std::vector<double>>> Points(
    Cluster& cluster, const std::string& experiment) {
  CommandResult exported = cluster.Taectl({"export", experiment, "--format", "csv"});
  REQUIRE(exported.exit_code == 0);
  std::map<std::pair<int64_t, std::string>, std::map<int64_t, std::vector<double>>> out;
  std::istringstream csv(exported.out);
  std::string row;
  std::getline(csv, row);  // run,variant,seed,metric,step,value,wall_time
  while (std::getline(csv, row)) {
    std::vector<std::string> cells;
    std::stringstream fields(row);
    for (std::string cell; std::getline(fields, cell, ',');) {
      cells.push_back(cell);
    }
    REQUIRE(cells.size() >= 6);
    out[{std::stoll(cells[0]), cells[3]}][std::stoll(cells[4])].push_back(std::stod(cells[5]));
  }
  return out;
}

std::string Logs(Cluster& cluster, int64_t run) {
  CommandResult logs = cluster.Taectl({"logs", "r" + std::to_string(run)});
  return logs.out + logs.err;
}

TEST_CASE(
    "a command job's own output format becomes metrics through [job.metrics] patterns, "
    "and a bad pattern is refused at submit where it is written") {
  Cluster cluster(1, 2);
  REQUIRE(cluster.started());
  std::filesystem::create_directories(cluster.dir().path() + "/job");
  // As nanoGPT-style scripts print: the step and the loss inside their own words; the eval on
  // stderr, every 5 steps.
  cluster.dir().Write("job/run.sh",
                      "i=1\n"
                      "while [ $i -le 20 ]; do\n"
                      "  echo \"iter_dt 21.72ms; iter $i: train loss $i.25\"\n"
                      "  if [ $((i % 5)) -eq 0 ]; then echo \"step $i: val acc 0.$i\" >&2; fi\n"
                      "  i=$((i + 1))\n"
                      "done\n");
  const std::string patterns =
      "[job.metrics]\n"
      "pattern = ['iter (?P<step>\\d+): train loss (?P<train_loss>[-+.\\deE]+)',\n"
      "           'step (?P<step>\\d+): val acc (?P<val_acc>\\S+)',\n"
      "           'never (?P<x>\\d+)']\n"
      "names = { train_loss = \"train/loss\", val_acc = \"val/acc\" }\n";
  const std::string head =
      "name = \"own-format\"\n[train]\nseeds = [0]\n[job]\ncode = \"job\"\ncommand = \"sh "
      "run.sh\"\n";
  const std::string spec = cluster.dir().Write("own.toml", head + patterns);
  const std::string exp =
      std::to_string(cluster.TaectlJson({"submit", spec}).at("experiment").get<int64_t>());
  CommandResult waited = cluster.Taectl({"wait", exp, "--timeout", "120"}, 150);
  INFO(waited.out << waited.err);
  REQUIRE(waited.exit_code == 0);
  const nlohmann::json runs = cluster.TaectlJson({"runs", exp});
  REQUIRE(runs.size() == 1);
  const int64_t run = runs[0].at("id");
  auto points = Points(cluster, exp);
  const auto& loss = points[{run, "train/loss"}];
  REQUIRE(loss.size() == 20);
  for (int i = 1; i <= 20; ++i) {
    INFO("step " << i);
    REQUIRE(loss.count(i) == 1);
    CHECK(loss.at(i) == std::vector<double>{i + 0.25});
  }
  const auto& acc = points[{run, "val/acc"}];
  CHECK(acc.size() == 4);
  CHECK(acc.at(10) == std::vector<double>{0.10});
  CHECK(points.count({run, "x"}) == 0);
  // The pattern that matched nothing is named in the run's log.
  const std::string logs = Logs(cluster, run);
  CHECK(logs.find("job.metrics.pattern 'never (?P<x>\\d+)' matched no line") != std::string::npos);
  CHECK(logs.find("train loss 2.25") != std::string::npos);  // the lines are kept too
  // And in taectl show, as a warning on the run.
  const nlohmann::json shown = cluster.TaectlJson({"show", "r" + std::to_string(run)});
  CHECK(shown.at("warnings") ==
        nlohmann::json::array(
            {"job.metrics.pattern 'never (?P<x>\\d+)' matched no line of this attempt's output"}));
  CHECK(cluster.Taectl({"show", "r" + std::to_string(run)})
            .out.find("warning: job.metrics.pattern") != std::string::npos);

  // A pattern RE2 refuses: file:line:col and RE2's words, nothing submitted.
  const std::string bad = cluster.dir().Write(
      "bad.toml", head + "[job.metrics]\npattern = ['ok (?P<a>\\d+)', 'iter (?P<step>\\d+']\n");
  CommandResult refused = cluster.Taectl({"submit", bad});
  CHECK(refused.exit_code != 0);
  CHECK(refused.err.find("bad.toml:8:") != std::string::npos);
  CHECK(refused.err.find("job.metrics.pattern[1]: missing )") != std::string::npos);
  CHECK(cluster.TaectlJson({"ls"}).size() == 1);
}

TEST_CASE(
    "an empty table says why: the report, taectl runs and submit --dry-run name the ways a "
    "command job reports, with the last lines one run printed") {
  Cluster cluster(1, 2);
  REQUIRE(cluster.started());
  std::filesystem::create_directories(cluster.dir().path() + "/job");
  cluster.dir().Write("job/run.sh",
                      "i=1\nwhile [ $i -le 30 ]; do echo \"iter $i: train loss 2.$i\"; "
                      "i=$((i + 1)); done\n");
  const std::string spec =
      cluster.dir().Write("silent.toml",
                          "name = \"silent\"\n[train]\nseeds = [0, 1]\n[job]\ncode = \"job\"\n"
                          "command = \"sh run.sh\"\n");
  CommandResult dry = cluster.Taectl({"submit", spec, "--dry-run"});
  REQUIRE(dry.exit_code == 0);
  CHECK(dry.out.find("sets neither [job.metrics] nor job.tensorboard") != std::string::npos);
  CHECK(dry.out.find("[job.metrics] pattern") != std::string::npos);
  // Its command never passes {train.seed}: said once, with how the seed reaches it.
  const std::string said = dry.out + dry.err;
  const size_t seed_note = said.find("note: job.command never uses {train.seed}");
  REQUIRE(seed_note != std::string::npos);
  CHECK(said.find("note: job.command never uses {train.seed}", seed_note + 1) == std::string::npos);
  CHECK(said.find("TAE_SEED", seed_note) != std::string::npos);
  const std::string exp =
      std::to_string(cluster.TaectlJson({"submit", spec}).at("experiment").get<int64_t>());
  REQUIRE(cluster.Taectl({"wait", exp, "--timeout", "120"}, 150).exit_code == 0);
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"report", exp}, std::vector<std::string>{"runs", exp}}) {
    CommandResult said = cluster.Taectl(command);
    INFO(command[0] << ": " << said.out << said.err);
    CHECK(said.exit_code == 0);
    CHECK(said.err.find("No run has reported a metric") != std::string::npos);
    CHECK(said.err.find("job.tensorboard") != std::string::npos);
    CHECK(said.err.find("  | iter 30: train loss 2.30") != std::string::npos);  // its last line
    CHECK(said.err.find("iter 18:") == std::string::npos);                      // only the last
  }
  const nlohmann::json report = cluster.TaectlJson({"report", exp});
  REQUIRE(report.contains("no_metrics"));
  CHECK(report.at("no_metrics").at("sample_output").size() == 12);
  // A study whose jobs report: nothing of the kind.
  cluster.dir().Write("job/run.sh", "echo step=1 loss=0.5\n");
  const std::string spoken =
      cluster.dir().Write("spoken.toml",
                          "name = \"spoken\"\n[train]\nseeds = [0]\n[job]\ncode = \"job\"\n"
                          "command = \"sh run.sh\"\n");
  const std::string exp2 =
      std::to_string(cluster.TaectlJson({"submit", spoken}).at("experiment").get<int64_t>());
  REQUIRE(cluster.Taectl({"wait", exp2, "--timeout", "120"}, 150).exit_code == 0);
  CHECK(cluster.Taectl({"report", exp2}).err.find("No run has reported") == std::string::npos);
  CHECK_FALSE(cluster.TaectlJson({"report", exp2}).contains("no_metrics"));
}

TEST_CASE(
    "a job's TensorBoard event files are stored as metrics, each point once across a kill "
    "-9 of the agent while records are half written") {
  setenv("TAE_AGENT_GRACE", "20", 1);
  Cluster cluster(1, 2);
  REQUIRE(cluster.started());
  std::filesystem::create_directories(cluster.dir().path() + "/job");
  std::filesystem::copy_file(std::string(TAE_SOURCE_DIR) + "/tests/tensorboard/slow_writer.py",
                             cluster.dir().path() + "/job/slow_writer.py");
  constexpr int kSteps = 30;
  const std::string spec =
      cluster.dir().Write("tb.toml",
                          "name = \"tb\"\n[train]\nseeds = [0, 1]\n[job]\ncode = \"job\"\n"
                          "command = \"/usr/bin/python3 slow_writer.py logs/tb " +
                              std::to_string(kSteps) +
                              " 0.2\"\ntensorboard = \"logs\"\n[resources]\nmax_attempts = 5\n");
  const std::string exp =
      std::to_string(cluster.TaectlJson({"submit", spec}).at("experiment").get<int64_t>());
  auto last_step = [&] {
    int64_t best = 0;
    for (const auto& run : cluster.TaectlJson({"runs", exp})) {
      if (run.at("state") == "running") {
        best = std::max<int64_t>(best, run.value("last_step", 0));
      }
    }
    return best;
  };
  int kills = 0;
  for (int round = 0; round < 2; ++round) {
    if (!WaitUntil([&] { return last_step() >= 5 + 10 * round; }, 120)) {
      break;
    }
    REQUIRE(KillLocalAgent(cluster, "local-0"));
    kills += 1;
  }
  CHECK(kills == 2);
  CommandResult waited = cluster.Taectl({"wait", exp, "--timeout", "240"}, 300);
  INFO(waited.out << waited.err);
  REQUIRE(waited.exit_code == 0);
  auto points = Points(cluster, exp);
  const nlohmann::json runs = cluster.TaectlJson({"runs", exp});
  REQUIRE(runs.size() == 2);
  for (const auto& r : runs) {
    const int64_t run = r.at("id");
    INFO("r" << run);
    CHECK(r.at("state") == "succeeded");
    CHECK(r.at("attempt") == 1);  // adopted, not restarted
    for (const auto& [metric, per_step] :
         std::map<std::string, double>{{"train/loss", 0.5}, {"grad_norm", 0.0}}) {
      INFO(metric);
      const auto& got = points[{run, metric}];
      CHECK(got.size() == kSteps);
      for (int s = 1; s <= kSteps; ++s) {
        INFO("step " << s);
        REQUIRE(got.count(s) == 1);
        const double want = metric == "train/loss" ? s + per_step : 2.0 * s;
        CHECK(got.at(s) == std::vector<double>{want});  // once, with its value
      }
    }
    CHECK(Logs(cluster, run).find("tensorboard tag 'grad norm' is stored as metric 'grad_norm'") !=
          std::string::npos);
  }
}

TEST_CASE("2,000 TensorBoard scalars at one step (a per-layer logger) are all stored, at that step",
          "[tensorboard]") {
  Cluster cluster(1, 1);
  REQUIRE(cluster.started());
  std::filesystem::create_directories(cluster.dir().path() + "/job");
  std::filesystem::copy_file(std::string(TAE_SOURCE_DIR) + "/examples/tensorboard/minimal_tb.py",
                             cluster.dir().path() + "/job/minimal_tb.py");
  cluster.dir().Write(
      "job/layers.py",
      "from minimal_tb import SummaryWriter\n"
      "w = SummaryWriter('logs')\n"
      "for step in (5, 6):\n"
      "    for layer in range(2000):\n"
      "        w.add_scalar(f'grad_norm/layer{layer:04d}', layer + step / 10, step)\n"
      "w.close()\n");
  const std::string spec =
      cluster.dir().Write("layers.toml",
                          "name = \"layers\"\n[train]\nseeds = [0]\n[job]\ncode = \"job\"\n"
                          "command = \"/usr/bin/python3 layers.py\"\ntensorboard = \"logs\"\n");
  const std::string exp =
      std::to_string(cluster.TaectlJson({"submit", spec}).at("experiment").get<int64_t>());
  CommandResult waited = cluster.Taectl({"wait", exp, "--timeout", "120"}, 150);
  INFO(waited.out << waited.err);
  REQUIRE(waited.exit_code == 0);
  CommandResult exported = cluster.Taectl({"export", exp, "--format", "json"});
  REQUIRE(exported.exit_code == 0);
  int series = 0;
  int exact = 0;
  for (const nlohmann::json& one : nlohmann::json::parse(exported.out)) {
    const std::string metric = one.at("metric");
    if (metric.rfind("grad_norm/layer", 0) != 0) {
      continue;
    }
    series += 1;
    const int layer = std::stoi(metric.substr(15));
    exact += one.at("steps") == nlohmann::json::array({5, 6}) &&
                     one.at("values") == nlohmann::json::array(
                                             {static_cast<double>(static_cast<float>(layer + 0.5)),
                                              static_cast<double>(static_cast<float>(layer + 0.6))})
                 ? 1
                 : 0;
  }
  CHECK(series == 2000);
  CHECK(exact == 2000);
  const int64_t run = cluster.TaectlJson({"runs", exp}).at(0).at("id");
  CHECK(Logs(cluster, run).find("ignored") == std::string::npos);  // nothing dropped on the way
}

// Protobuf wire bytes, enough for TensorBoard scalars: a key, and a varint.
std::string Varint(uint64_t v) {
  std::string out;
  while (v > 0x7f) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}
std::string Bytes(int field, const std::string& payload) {
  return Varint(static_cast<uint64_t>(field) << 3 | 2) + Varint(payload.size()) + payload;
}
// One TFRecord of an Event at `step` whose summary holds `values` simple_value scalars.
std::string ScalarsRecord(int64_t step, int values) {
  std::string summary;
  for (int i = 0; i < values; ++i) {
    std::string tag = "layers/" + std::to_string(i) + "/" + std::string(100, 'g');
    const float value = static_cast<float>(step) + static_cast<float>(i) / 1024.0f;
    std::string simple(4, '\0');
    std::memcpy(simple.data(), &value, 4);
    summary += Bytes(1, Bytes(1, tag) + Varint(2 << 3 | 5) + simple);
  }
  const double wall = 1.8e9 + static_cast<double>(step);
  std::string time(8, '\0');
  std::memcpy(time.data(), &wall, 8);
  const std::string event =
      Varint(1 << 3 | 1) + time + Varint(2 << 3 | 0) + Varint(step) + Bytes(5, summary);
  std::string length(8, '\0');
  const uint64_t size = event.size();
  std::memcpy(length.data(), &size, 8);
  std::string out = length;
  const uint32_t length_crc = tensorboard::MaskedCrc32c(length);
  out.append(reinterpret_cast<const char*>(&length_crc), 4);
  out += event;
  const uint32_t data_crc = tensorboard::MaskedCrc32c(event);
  out.append(reinterpret_cast<const char*>(&data_crc), 4);
  return out;
}

TEST_CASE(
    "a 74 MB TensorBoard file of 1,024-scalar steps goes to taed in messages it takes: its "
    "points and the next run's are stored, nothing wedges",
    "[limits][tensorboard]") {
  Cluster cluster(1, 1);
  REQUIRE(cluster.started());
  std::filesystem::create_directories(cluster.dir().path() + "/job");
  // 600 steps of 1,024 scalars with 110-character tags: the agent makes 600 events of ~120 KB,
  // one batch of ~74 MB, over taed's 64 MiB message: refused and sent again forever before.
  std::string file;
  for (int64_t step = 1; step <= 600; ++step) {
    file += ScalarsRecord(step, 1024);
  }
  REQUIRE(file.size() > (64u << 20));
  cluster.dir().Write("events.bin", file);
  cluster.dir().Write("job/copy.sh", "mkdir -p logs && cp " + cluster.dir().path() +
                                         "/events.bin logs/events.out.tfevents.1.x\n"
                                         "echo step=601 done=1\n");
  const std::string spec =
      cluster.dir().Write("big.toml",
                          "name = \"big\"\n[train]\nseeds = [0]\n[job]\ncode = \"job\"\n"
                          "command = \"sh copy.sh\"\ntensorboard = \"logs\"\n");
  const std::string exp =
      std::to_string(cluster.TaectlJson({"submit", spec}).at("experiment").get<int64_t>());
  CommandResult waited = cluster.Taectl({"wait", exp, "--timeout", "300"}, 330);
  INFO(waited.out << waited.err);
  REQUIRE(waited.exit_code == 0);
  const nlohmann::json run = cluster.TaectlJson({"runs", exp}).at(0);
  CHECK(run.at("state") == "succeeded");
  CHECK(run.at("last_step") == 601);
  CommandResult one = cluster.Taectl(
      {"export", exp, "--format", "json", "--metric", "layers/1023/" + std::string(100, 'g')});
  REQUIRE(one.exit_code == 0);
  const nlohmann::json series = nlohmann::json::parse(one.out);
  REQUIRE(series.size() == 1);
  CHECK(series[0].at("steps").size() == 600);
  // And the agent goes on reporting: the next run's points arrive.
  const std::string after =
      cluster.dir().Write("after.toml",
                          "name = \"after\"\n[train]\nseeds = [0]\n[job]\ncode = \"job\"\n"
                          "command = \"echo step=3 loss=0.5\"\n");
  const std::string next =
      std::to_string(cluster.TaectlJson({"submit", after}).at("experiment").get<int64_t>());
  REQUIRE(cluster.Taectl({"wait", next, "--timeout", "120"}, 150).exit_code == 0);
  CHECK(cluster.TaectlJson({"runs", next}).at(0).at("final_metrics").at("loss") == 0.5);
}

}  // namespace
}  // namespace tae::testing
