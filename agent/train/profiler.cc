#include "agent/train/profiler.h"

#include <ATen/record_function.h>
#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tae::train {
namespace {

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// What one capture records on the training thread (see the Recorder below).
struct Event {
  std::string name;  // empty: a [memory] event
  int64_t start_ns = 0;
  int64_t end_ns = -1;  // -1: still open (or a memory event)
  std::vector<std::vector<int64_t>> shapes;
  int64_t bytes = 0;      // memory: this allocation (< 0: a free)
  int64_t allocated = 0;  // memory: the running total since the capture began
};

// Operators whose insides are their own cost: libtorch's CPU bmm runs a select, a resolve_conj
// and an addmm_ per matrix of the batch (thousands per step); recording those would multiply
// the profile's cost and size without saying more than the bmm's own range does.
bool IsKernel(const char* name) {
  static const char* const kKernels[] = {"aten::bmm",   "aten::baddbmm", "aten::mm",
                                         "aten::addmm", "aten::addmm_",  "aten::addbmm"};
  for (const char* kernel : kKernels) {
    if (std::strcmp(name, kernel) == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

// The events of the capture in progress on this thread; nullptr when none.
class ProfileRecorder;
thread_local ProfileRecorder* g_recorder = nullptr;

// A capture: RecordFunction callbacks on this thread record each operator's name, input shapes
// and times, except inside a kernel (IsKernel); the CPU allocator's reports (through the
// PROFILER_STATE debug info) become memory events.
class ProfileRecorder : public c10::MemoryReportingInfoBase {
 public:
  struct Context : at::ObserverContext {
    int64_t index = -1;  // into events_; -1: not recorded
    bool kernel = false;
  };

  ProfileRecorder() {
    events_.reserve(1 << 16);
    g_recorder = this;
    RecordShapes(true);
  }

  // Input shapes cost more than everything else together: libtorch then boxes every operator's
  // arguments, also the thousands inside bmm that are not recorded (~1.8x a step instead of
  // ~1.1x on the d256 L4 GPT). A capture records them in its first step only: a training step's
  // operators see the same shapes every step. Call between steps (no operator in progress).
  void RecordShapes(bool on) {
    if (handle_ != 0) {
      at::removeCallback(handle_);
    }
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback(&ProfileRecorder::OnStart, &ProfileRecorder::OnEnd)
            .needsInputs(on));
  }
  ~ProfileRecorder() override { Detach(); }

  // Records nothing more.
  void Detach() {
    if (handle_ != 0) {
      at::removeCallback(handle_);
      handle_ = 0;
    }
    if (g_recorder == this) {
      g_recorder = nullptr;
    }
  }

  void reportMemoryUsage(void* /*ptr*/, int64_t alloc_size, int64_t /*total_allocated*/,
                         int64_t /*total_reserved*/, c10::Device device) override {
    if (!device.is_cpu()) {
      return;
    }
    allocated_ += alloc_size;
    Event e;
    e.start_ns = NowNs();
    e.bytes = alloc_size;
    e.allocated = allocated_;
    events_.push_back(std::move(e));
  }
  bool memoryProfilingEnabled() const override { return true; }

  std::vector<Event>& events() { return events_; }

 private:
  static std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& fn) {
    auto context = std::make_unique<Context>();
    ProfileRecorder* r = g_recorder;
    if (r == nullptr || r->inside_kernel_ > 0) {
      return context;
    }
    Event e;
    e.name = fn.name();
    e.start_ns = NowNs();
    if (fn.needsInputs()) {
      for (const c10::IValue& input : fn.inputs()) {
        if (input.isTensor()) {
          const at::Tensor& t = input.toTensor();
          e.shapes.emplace_back(t.defined() ? t.sizes().vec() : std::vector<int64_t>{});
        } else {
          e.shapes.emplace_back();
        }
      }
    }
    context->index = static_cast<int64_t>(r->events_.size());
    context->kernel = IsKernel(fn.name());
    r->inside_kernel_ += context->kernel ? 1 : 0;
    r->events_.push_back(std::move(e));
    return context;
  }

  static void OnEnd(const at::RecordFunction& /*fn*/, at::ObserverContext* base) {
    ProfileRecorder* r = g_recorder;
    auto* context = static_cast<Context*>(base);
    if (r == nullptr || context == nullptr || context->index < 0) {
      return;
    }
    r->events_[static_cast<size_t>(context->index)].end_ns = NowNs();
    r->inside_kernel_ -= context->kernel ? 1 : 0;
  }

  at::CallbackHandle handle_ = 0;
  std::vector<Event> events_;
  int64_t allocated_ = 0;
  int inside_kernel_ = 0;
};

namespace {

// The events as Chrome trace JSON (see profiler.h), in the order they began; times are
// microseconds from the first event.
std::string ChromeTrace(const std::vector<Event>& events, uint64_t tid) {
  const int64_t origin = events.empty() ? 0 : events.front().start_ns;
  nlohmann::json out = nlohmann::json::array();
  for (const Event& e : events) {
    const double ts = static_cast<double>(e.start_ns - origin) / 1e3;
    if (e.name.empty()) {
      out.push_back(
          {{"name", "[memory]"},
           {"ph", "i"},
           {"s", "t"},
           {"cat", "cpu_instant_event"},
           {"ts", ts},
           {"pid", 0},
           {"tid", tid},
           {"args", {{"Device Type", 0}, {"Bytes", e.bytes}, {"Total Allocated", e.allocated}}}});
      continue;
    }
    if (e.end_ns < 0) {
      continue;  // still open when the capture ended (not a whole range)
    }
    nlohmann::json event = {{"name", e.name},
                            {"ph", "X"},
                            {"cat", "cpu_op"},
                            {"ts", ts},
                            {"dur", static_cast<double>(e.end_ns - e.start_ns) / 1e3},
                            {"pid", 0},
                            {"tid", tid}};
    if (!e.shapes.empty()) {
      event["args"] = {{"Input Dims", e.shapes}};
    }
    out.push_back(std::move(event));
  }
  nlohmann::json doc = {
      {"traceEvents", std::move(out)},
      {"displayTimeUnit", "ms"},
      {"otherData",
       {{"tool", "tae-train"},
        {"note", "operators inside aten::bmm, baddbmm, mm and addmm are not recorded"}}}};
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

StepProfiler::~StepProfiler() = default;  // a capture still open is dropped unwritten

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
  auto recorder = std::make_shared<ProfileRecorder>();
  active_ =
      Active{*std::move(request),
             step,
             0,
             SteadySeconds(),
             recorder,
             std::make_shared<c10::DebugInfoGuard>(c10::DebugInfoKind::PROFILER_STATE, recorder)};
}

std::optional<FinishedProfile> StepProfiler::Finish() {
  if (!active_.has_value()) {
    return std::nullopt;
  }
  Active finished = *std::move(active_);
  active_.reset();
  return Stop(std::move(finished));
}

std::optional<FinishedProfile> StepProfiler::AfterStep(int64_t step) {
  if (!active_.has_value()) {
    return std::nullopt;
  }
  active_->steps += 1;
  if (active_->steps == 1) {
    active_->recorder->RecordShapes(false);  // shapes: the first step's (see RecordShapes)
  }
  const ProfileRequest& request = active_->request;
  const bool done = request.seconds > 0 ? SteadySeconds() - active_->started >= request.seconds
                                        : active_->steps >= request.steps;
  (void)step;
  if (!done) {
    return std::nullopt;
  }
  Active finished = *std::move(active_);
  active_.reset();
  return Stop(std::move(finished));
}

FinishedProfile StepProfiler::Stop(Active active) {
  FinishedProfile out{active.request.id, active.first_step, active.steps, ""};
  active.guard.reset();  // allocations are no longer reported
  active.recorder->Detach();
  const std::vector<Event> events = std::move(active.recorder->events());
  const std::string path = dir_ + "/trace.json";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream file(tmp, std::ios::trunc);
    file << ChromeTrace(events, static_cast<uint64_t>(gettid()));
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
