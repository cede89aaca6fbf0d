#include "agent/train/profiler.h"

#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tae::train {
namespace {

namespace prof = torch::autograd::profiler;

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The legacy profiler's events as Chrome trace JSON (see profiler.h). Ranges are matched by
// their RecordFunction handle; times are microseconds from the first event.
std::string ChromeTrace(const prof::thread_event_lists& lists) {
  double origin = -1;
  for (const auto& list : lists) {
    for (const prof::LegacyEvent& e : list) {
      if (origin < 0 || e.cpuUs() < origin) {
        origin = e.cpuUs();
      }
    }
  }
  // Events in the order they began (a range before the ranges inside it, also when their times
  // are equal at microsecond resolution).
  std::vector<std::pair<size_t, nlohmann::json>> ordered;
  size_t sequence = 0;
  for (const auto& list : lists) {
    std::map<uint64_t, std::pair<const prof::LegacyEvent*, size_t>> open;  // handle -> its push
    int64_t allocated = 0;
    for (const prof::LegacyEvent& e : list) {
      ++sequence;
      switch (e.kind()) {
        case prof::EventKind::PushRange:
          open[e.handle()] = {&e, sequence};
          break;
        case prof::EventKind::PopRange: {
          auto it = open.find(e.handle());
          if (it == open.end()) {
            break;
          }
          const prof::LegacyEvent& push = *it->second.first;
          nlohmann::json event = {{"name", push.name()},
                                  {"ph", "X"},
                                  {"cat", "cpu_op"},
                                  {"ts", push.cpuUs() - origin},
                                  {"dur", push.cpuElapsedUs(e)},
                                  {"pid", 0},
                                  {"tid", push.threadId()}};
          std::vector<std::vector<int64_t>> shapes = push.shapes();
          if (!shapes.empty()) {
            event["args"] = {{"Input Dims", shapes}};
          }
          ordered.emplace_back(it->second.second, std::move(event));
          open.erase(it);
          break;
        }
        case prof::EventKind::MemoryAlloc:
          allocated += e.cpuMemoryUsage();
          ordered.emplace_back(sequence, nlohmann::json{{"name", "[memory]"},
                            {"ph", "i"},
                            {"s", "t"},
                            {"cat", "cpu_instant_event"},
                            {"ts", e.cpuUs() - origin},
                            {"pid", 0},
                            {"tid", e.threadId()},
                            {"args",
                             {{"Device Type", 0},
                              {"Bytes", e.cpuMemoryUsage()},
                              {"Total Allocated", allocated}}}});
          break;
        case prof::EventKind::Mark:
          break;
      }
    }
  }
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  nlohmann::json events = nlohmann::json::array();
  for (auto& [position, event] : ordered) {
    events.push_back(std::move(event));
  }
  nlohmann::json doc = {{"traceEvents", std::move(events)},
                        {"displayTimeUnit", "ms"},
                        {"otherData", {{"tool", "tae-train (libtorch legacy profiler)"}}}};
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::optional<ProfileRequest> ParseProfileRequest(const std::string& text) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (!doc.is_object() || !doc.contains("id") || !doc["id"].is_string()) {
    return std::nullopt;
  }
  ProfileRequest request;
  request.id = doc["id"].get<std::string>();
  if (doc.contains("steps") && doc["steps"].is_number_integer()) {
    request.steps = doc["steps"].get<int64_t>();
  }
  if (doc.contains("seconds") && doc["seconds"].is_number()) {
    request.seconds = doc["seconds"].get<double>();
  }
  if (request.id.empty() || request.steps < 0 || request.seconds < 0) {
    return std::nullopt;
  }
  if (request.steps == 0 && request.seconds == 0) {
    request.steps = 5;
  }
  return request;
}

StepProfiler::StepProfiler(std::string dir, std::string request_path,
                           std::vector<int64_t> profile_at, int64_t profile_steps)
    : dir_(std::move(dir)),
      request_path_(std::move(request_path)),
      profile_at_(profile_at.begin(), profile_at.end()),
      profile_steps_(std::max<int64_t>(1, profile_steps)) {}

StepProfiler::~StepProfiler() {
  if (active_.has_value()) {
    prof::disableProfilerLegacy();  // a run that ended mid-capture: nothing is written
  }
}

void StepProfiler::BeforeStep(int64_t step) {
  if (dir_.empty() || active_.has_value()) {
    return;
  }
  if (profile_at_.count(step) > 0) {
    due_.push_back(ProfileRequest{absl::StrCat("step", step), profile_steps_, 0.0});
  }
  std::optional<ProfileRequest> request;
  if (!request_path_.empty()) {
    std::ifstream in(request_path_);
    if (in) {
      std::stringstream text;
      text << in.rdbuf();
      request = ParseProfileRequest(text.str());
      if (request.has_value() && answered_.count(request->id) > 0) {
        request.reset();
      }
    }
  }
  if (!request.has_value() && due_.empty()) {
    return;
  }
  // The agent empties the directory once it has taken the previous profile: until then a new
  // capture waits (it would write into the files being taken).
  std::error_code ec;
  if (std::filesystem::directory_iterator(dir_, ec) != std::filesystem::directory_iterator()) {
    return;
  }
  if (!request.has_value()) {
    request = due_.front();
    due_.erase(due_.begin());
  }
  answered_.insert(request->id);
  prof::enableProfilerLegacy(torch::profiler::impl::ProfilerConfig(
      torch::profiler::impl::ProfilerState::CPU, /*report_input_shapes=*/true,
      /*profile_memory=*/true));
  active_ = Active{*std::move(request), step, 0, SteadySeconds()};
}

std::optional<FinishedProfile> StepProfiler::Finish() {
  if (!active_.has_value()) {
    return std::nullopt;
  }
  Active finished = *std::move(active_);
  active_.reset();
  return Stop(finished);
}

std::optional<FinishedProfile> StepProfiler::AfterStep(int64_t step) {
  if (!active_.has_value()) {
    return std::nullopt;
  }
  active_->steps += 1;
  const ProfileRequest& request = active_->request;
  const bool done = request.seconds > 0
                        ? SteadySeconds() - active_->started >= request.seconds
                        : active_->steps >= request.steps;
  (void)step;
  if (!done) {
    return std::nullopt;
  }
  Active finished = *std::move(active_);
  active_.reset();
  return Stop(finished);
}

FinishedProfile StepProfiler::Stop(const Active& active) {
  FinishedProfile out{active.request.id, active.first_step, active.steps, ""};
  prof::thread_event_lists lists = prof::disableProfilerLegacy();
  const std::string path = dir_ + "/trace.json";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream file(tmp, std::ios::trunc);
    file << ChromeTrace(lists);
    if (!file.good()) {
      out.error = absl::StrCat("cannot write ", path);
      return out;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    out.error = absl::StrCat("cannot write ", path);
  }
  return out;
}

}  // namespace tae::train
