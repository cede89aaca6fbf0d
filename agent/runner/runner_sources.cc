// The Runner's metric sources beyond the job's metrics fd and key=value stdout lines
// (docs/metrics.md): [job.metrics] patterns over its output lines, and the TensorBoard event
// files it writes under job.tensorboard.

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/runner/runner_job.h"
#include "common/fs/fs.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace tae::agent {
namespace {

constexpr int kStdoutBit = 1;
constexpr int kStderrBit = 2;
constexpr auto kEventFilesEvery = std::chrono::seconds(1);

tae::v1::Event AgentLine(std::string text) {
  tae::v1::Event event;
  event.mutable_log()->set_stream("agent");
  event.mutable_log()->set_text(std::move(text));
  return event;
}

// `dir` (job.tensorboard) under `run_dir`, or empty when it would leave it.
std::string UnderRunDir(const std::string& run_dir, const std::string& dir) {
  const std::filesystem::path joined =
      (std::filesystem::path(run_dir) / std::filesystem::path(dir)).lexically_normal();
  const std::filesystem::path base = std::filesystem::path(run_dir).lexically_normal();
  const std::string rel = joined.lexically_relative(base).string();
  if (std::filesystem::path(dir).is_absolute() || rel.empty() || rel.rfind("..", 0) == 0) {
    return "";
  }
  return joined.string();
}

}  // namespace

void Runner::SetUpSources(Job& job, const std::map<int, uint64_t>& event_file_offsets) {
  if (!job.command) {
    return;  // tae-train reports on its metrics fd
  }
  const nlohmann::json config = nlohmann::json::parse(job.spec.config_json(), nullptr, false);
  if (!config.is_object()) {
    return;
  }
  std::vector<std::string> patterns;
  std::map<std::string, std::string> names;
  std::string stream = "both";
  std::string tensorboard;
  try {
    if (auto it = config.find("job.metrics.pattern"); it != config.end() && it->is_array()) {
      patterns = it->get<std::vector<std::string>>();
    }
    if (auto it = config.find("job.metrics.names"); it != config.end() && it->is_object()) {
      names = it->get<std::map<std::string, std::string>>();
    }
    if (auto it = config.find("job.metrics.stream"); it != config.end() && it->is_string()) {
      stream = it->get<std::string>();
    }
    if (auto it = config.find("job.tensorboard"); it != config.end() && it->is_string()) {
      tensorboard = it->get<std::string>();
    }
    if (auto it = config.find("job.checkpoints"); it != config.end() && *it == "watch") {
      // What the attempt starts with (a restored checkpoint) is not a new one.
      job.watch_checkpoints = true;
      job.watch_captured = job.watch_seen =
          CheckpointDirSignature(CheckpointDir(job.spec.run_id()));
      job.watch_since = std::chrono::steady_clock::now();
    }
  } catch (const nlohmann::json::exception& error) {
    Emit(job, AgentLine(absl::StrCat("warning: job.metrics: ignored: ", error.what())),
         std::nullopt);
    patterns.clear();
  }
  if (!patterns.empty()) {
    absl::StatusOr<metrics::LinePatterns> compiled = metrics::LinePatterns::Create(patterns, names);
    if (compiled.ok()) {
      job.patterns = std::make_unique<metrics::LinePatterns>(*std::move(compiled));
      job.pattern_streams = stream == "stdout"   ? kStdoutBit
                            : stream == "stderr" ? kStderrBit
                                                 : kStdoutBit | kStderrBit;
      if (absl::StatusOr<std::string> matched = fs::ReadFile(job.job_dir + "/patterns_matched");
          matched.ok()) {
        job.patterns->SetMatched(*matched);  // matched before an agent restart
      }
      job.patterns_matched = job.patterns->MatchedFlags();
    } else {
      Emit(job, AgentLine(absl::StrCat("warning: ignored: ", compiled.status().message())),
           std::nullopt);
    }
  }
  if (!tensorboard.empty()) {
    const std::string root = UnderRunDir(job.run_dir, tensorboard);
    if (root.empty()) {
      Emit(job,
           AgentLine(absl::StrCat("warning: job.tensorboard: '", tensorboard,
                                  "' is not a directory inside the run directory: ignored")),
           std::nullopt);
      return;
    }
    job.event_files = std::make_unique<EventFileFollower>(root, job.job_dir + "/tensorboard_files");
    if (absl::Status resumed = job.event_files->Resume(event_file_offsets); !resumed.ok()) {
      spdlog::warn("run r{}: event files: {}", job.spec.run_id(), resumed.ToString());
    }
  }
}

std::optional<metrics::MetricRecord> Runner::MatchPatterns(Job& job, int index,
                                                           std::string_view line) {
  if (job.patterns == nullptr || !(job.pattern_streams & (1 << index))) {
    return std::nullopt;
  }
  std::optional<metrics::MetricRecord> record = job.patterns->Match(line);
  if (std::string flags = job.patterns->MatchedFlags(); flags != job.patterns_matched) {
    // Only for the end-of-attempt warning after an agent restart: lost, a pattern that matched
    // before the restart may be named as unmatched, nothing more.
    (void)fs::WriteFileAtomically(job.job_dir + "/patterns_matched", flags,
                                  {0644, fs::Durability::kNone});
    job.patterns_matched = std::move(flags);
  }
  return record;
}

void Runner::PollEventFiles(Job& job, bool final) {
  if (job.event_files == nullptr) {
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (!final && now < job.event_files_due) {
    return;
  }
  job.event_files_due = now + kEventFilesEvery;
  const bool reports_metrics = job.spec.world_size() <= 1 || job.spec.rank() == 0;
  std::vector<EventFileFollower::Read> reads = job.event_files->Poll(final);
  for (std::string& note : job.event_files->TakeNotes()) {
    Emit(job, AgentLine(std::move(note)), std::nullopt);
  }
  for (EventFileFollower::Read& read : reads) {
    std::vector<tae::v1::Event> events;
    for (std::string& warning : read.warnings) {
      events.push_back(AgentLine(std::move(warning)));
    }
    // One metrics event per run of points at the same step, in file order, split at
    // metrics::kMaxValuesPerLine (what taed takes in one event: a per-layer logger writes
    // thousands of scalars at one step).
    for (size_t i = 0; reports_metrics && i < read.scalars.size();) {
      const int64_t step = read.scalars[i].step;
      std::vector<std::pair<std::string, double>> values;
      for (; i < read.scalars.size() && read.scalars[i].step == step &&
             values.size() < metrics::kMaxValuesPerLine;
           ++i) {
        const std::string& tag = read.scalars[i].tag;
        std::string name = MetricNameOfTag(tag);
        if (name != tag && job.tags_renamed.insert(tag).second) {
          events.push_back(AgentLine(absl::StrCat("tensorboard tag '", tag.substr(0, 200),
                                                  "' is stored as metric '", name, "'")));
        }
        values.emplace_back(std::move(name), read.scalars[i].value);
      }
      job.last_step = std::max(job.last_step, step);
      events.push_back(MetricsEvent(step, values));
    }
    // The file's offset goes with its last event, so a restart resumes after what was sent.
    for (size_t i = 0; i < events.size(); ++i) {
      std::optional<OutputMark> mark;
      if (i + 1 == events.size()) {
        mark = OutputMark{read.stream, read.end};
      }
      Emit(job, std::move(events[i]), mark);
    }
  }
}

void Runner::WarnUnmatchedPatterns(Job& job) {
  if (job.patterns == nullptr) {
    return;
  }
  const std::vector<std::string> unmatched = job.patterns->Unmatched();
  for (const std::string& pattern : unmatched) {
    Emit(job,
         AgentLine(absl::StrCat("warning: job.metrics.pattern '", pattern.substr(0, 300),
                                "' matched no line of this attempt's output")),
         std::nullopt);
  }
}

}  // namespace tae::agent
