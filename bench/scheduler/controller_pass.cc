#include "bench/scheduler/controller_pass.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "boost/asio/io_context.hpp"
#include "server/controller/controller.h"
#include "server/store/store.h"
#include "spdlog/spdlog.h"

namespace tae::bench {
namespace {

class CountingChannel : public registry::AgentChannel {
 public:
  void Send(const tae::v1::TaedMessage& message) override { starts += message.has_start_run(); }
  void Close() override {}
  int starts = 0;
};

std::string Spec(const std::string& name, int variants, int seeds) {
  std::vector<int> seed_list;
  for (int i = 0; i < seeds; ++i) {
    seed_list.push_back(i);
  }
  std::string text = absl::StrCat("name = \"", name, "\"\n[train]\ntask = \"copy\"\nsteps = 100\n",
                                  "seeds = [", absl::StrJoin(seed_list, ", "), "]\n");
  for (int v = 1; v < variants; ++v) {
    absl::StrAppend(&text, "\n[[ablation]]\nname = \"lr-", v, "\"\n\"train.lr\" = ", 1e-4 * v,
                    "\n");
  }
  return text;
}

double Ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since)
      .count();
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int RunControllerPass(const ControllerPassOptions& options) {
  spdlog::set_level(spdlog::level::warn);  // taed's per-run lines
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / absl::StrCat("tae-sched-bench-", getpid());
  std::filesystem::create_directories(dir);
  struct Cleanup {
    std::filesystem::path dir;
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup{dir};
  auto opened = store::Store::Open((dir / "taed.db").string());
  if (!opened.ok()) {
    std::fprintf(stderr, "tae-scheduler-bench: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<store::Store> store = std::move(*opened);
  boost::asio::io_context io;
  controller::Controller controller(&io, store.get(), controller::Options{});
  int small = 0;
  // Submits the next 10-run study; its time in ms (negative: refused).
  auto submit_small = [&] {
    const std::string name = absl::StrCat("small-", small++);
    const auto start = std::chrono::steady_clock::now();
    auto submitted = controller.Submit({Spec(name, 5, 2), name + ".toml", {}, false, ""});
    const double ms = Ms(start);
    if (!submitted.ok()) {
      std::fprintf(stderr, "tae-scheduler-bench: submit %s: %s\n", name.c_str(),
                   submitted.status().ToString().c_str());
      return -1.0;
    }
    return ms;
  };
  // The reference: one read of every queued run, whole rows, as each pass did (twice) before.
  auto read_queue = [&] {
    const auto start = std::chrono::steady_clock::now();
    auto queued = store->QueuedRuns();
    return queued.ok() ? Ms(start) : -1.0;
  };
  struct Row {
    std::string what;
    double ms = 0;
    double reference_ms = 0;
  };
  std::vector<Row> rows;
  auto submits_at = [&](const std::string& what) {
    std::vector<double> ms;
    std::vector<double> reference;
    for (int i = 0; i < options.repeat; ++i) {
      ms.push_back(submit_small());
      reference.push_back(read_queue());
    }
    if (*std::min_element(ms.begin(), ms.end()) < 0) {
      return false;
    }
    rows.push_back({what, Median(ms), Median(reference)});
    return true;
  };
  std::fprintf(stderr, "  filling the queue: %d + %d x 10 runs through Controller::Submit...\n",
               options.big_runs, options.experiments);
  const auto fill_start = std::chrono::steady_clock::now();
  if (!submits_at("10-run submit, queue empty")) {
    return 1;
  }
  const int variants = 100;
  const int seeds = std::max(1, options.big_runs / variants);
  if (auto big = controller.Submit({Spec("big", variants, seeds), "big.toml", {}, false, ""});
      !big.ok()) {
    std::fprintf(stderr, "tae-scheduler-bench: submit big: %s\n", big.status().ToString().c_str());
    return 1;
  }
  while (small < options.experiments / 2) {
    if (submit_small() < 0) {
      return 1;
    }
  }
  if (!submits_at(absl::StrCat("10-run submit, ", small, " studies queued"))) {
    return 1;
  }
  while (small < options.experiments) {
    if (submit_small() < 0) {
      return 1;
    }
    if (small % 250 == 0) {
      std::fprintf(stderr, "  %d studies queued\n", small);
    }
  }
  if (!submits_at(absl::StrCat("10-run submit, ", small, " studies queued"))) {
    return 1;
  }
  const double fill_s = Ms(fill_start) / 1000;
  const size_t queued = store->QueuedRuns()->size();

  auto passes = [&](const std::string& what) {
    std::vector<double> ms;
    std::vector<double> reference;
    for (int i = 0; i < options.repeat; ++i) {
      const auto start = std::chrono::steady_clock::now();
      controller.Schedule();
      ms.push_back(Ms(start));
      reference.push_back(read_queue());
    }
    rows.push_back({what, Median(ms), Median(reference)});
  };
  passes("pass, no agent");
  // Agents connect one at a time: each connection's pass places 4 runs.
  std::vector<std::shared_ptr<CountingChannel>> channels;
  std::vector<double> connect_ms;
  std::vector<double> connect_reference;
  for (int a = 0; a < std::max(8, options.repeat); ++a) {
    auto channel = std::make_shared<CountingChannel>();
    channels.push_back(channel);
    controller::AgentHello hello;
    hello.agent.id = absl::StrCat("agent-", a);
    hello.agent.slots = 4;
    const auto start = std::chrono::steady_clock::now();
    controller.OnRegister(channel, hello);
    connect_ms.push_back(Ms(start));
    connect_reference.push_back(read_queue());
  }
  rows.push_back(
      {"pass placing 4 runs (an agent connects)", Median(connect_ms), Median(connect_reference)});
  passes("pass, every agent busy");
  int placed = 0;
  for (const auto& channel : channels) {
    placed += channel->starts;
  }
  const int expected = static_cast<int>(channels.size()) * 4;
  const size_t left = store->QueuedRuns()->size();

  std::printf(
      "\nthrough the controller: %zu runs queued in %d studies (filled in %.0f s), "
      "SQLite on disk, median of %d\n",
      queued, small + 1, fill_s, options.repeat);
  std::printf("  %-44s %10s %24s %8s\n", "", "ms", "read queue (before) ms", "ratio");
  for (const Row& row : rows) {
    std::printf("  %-44s %10.2f %24.2f %8.2f\n", row.what.c_str(), row.ms, row.reference_ms,
                row.ms / row.reference_ms);
  }
  const bool ok = placed == expected && left == queued - static_cast<size_t>(expected);
  std::printf("  placed %d runs on %zu agents (expected %d), %zu left queued: %s\n", placed,
              channels.size(), expected, left, ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}

}  // namespace tae::bench
