#pragma once

// StepProfiler: tae-train's profiles, on demand and at chosen steps (docs/profiles.md).
//
// A capture covers whole training steps. It starts before a step when
//  - the agent asked for one: the request file (TAE_PROFILE_REQUEST) holds
//    {"id": "p3f9a2c", "steps": N, "seconds": S} with an id not yet answered, or
//  - the step is one of train.profile_at (id "step<N>", train.profile_steps steps),
// and ends after the step that completes N steps (or S seconds), or with the run's last step.
// It records, through RecordFunction callbacks on the training thread, every operator call with
// its times (and, in the capture's first step, its input shapes), except the calls inside a
// matmul kernel (libtorch's CPU bmm makes
// three per matrix of its batch: thousands per step, which would multiply the capture's cost),
// and every CPU allocation (the allocator reports to the profiler's debug-info slot). Debian's
// libtorch has no Kineto; its legacy profiler records every call and costs ~1.9x a step here.
// Input shapes are recorded in the first step only: they make libtorch box every operator's
// arguments, which alone costs ~1.8x a step of the d256 L4 GPT.
// A capture starts only when TAE_PROFILE_DIR is empty: the agent empties it once it has taken
// the previous profile; until then a due capture waits.
//
// The capture is written to TAE_PROFILE_DIR as Chrome trace JSON (trace.json, the
// chrome://tracing / Perfetto format): one complete event ("ph": "X") per operator (with
// "Input Dims" in the first step), one "ProfilerStep#N" event around each step and one
// "Optimizer.step" around the update, and "[memory]" instant events whose args hold "Bytes" and
// "Total Allocated" (the net bytes allocated since the capture began), as torch.profiler writes
// them. The caller then emits the profile mark the agent waits for.
//
// When no capture is running, BeforeStep costs one failed open(2) of the request file (a few
// microseconds) and nothing else is recorded.

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace c10 {
class DebugInfoGuard;
}  // namespace c10

namespace tae::train {

class ProfileRecorder;  // profiler.cc

struct ProfileRequest {
  std::string id;
  int64_t steps = 0;     // > 0: this many steps
  double seconds = 0.0;  // > 0: steps until this much time has passed (at least one)
};

// {"id": ..., "steps": ..., "seconds": ...}; nullopt when it is not one.
std::optional<ProfileRequest> ParseProfileRequest(const std::string& text);

// A finished capture, for the profile mark.
struct FinishedProfile {
  std::string id;
  int64_t first_step = 0;
  int64_t steps = 0;
  std::string error;  // set: nothing usable was written
};

class StepProfiler {
 public:
  // `dir` and `request_path`: TAE_PROFILE_DIR and TAE_PROFILE_REQUEST ("" when unset: only
  // profile_at captures, and only when dir is set). `profile_at`: steps that start a capture of
  // `profile_steps` steps.
  StepProfiler(std::string dir, std::string request_path, std::vector<int64_t> profile_at,
               int64_t profile_steps);
  ~StepProfiler();

  bool enabled() const { return !dir_.empty(); }
  // Starts a capture before `step` when one is due (see the header comment).
  void BeforeStep(int64_t step);
  // Ends the capture when `step` completes it; its outcome is returned once.
  std::optional<FinishedProfile> AfterStep(int64_t step);
  // Ends a capture the run's last step left open (fewer steps than asked); nullopt when none.
  std::optional<FinishedProfile> Finish();
  // A capture is in progress (the trainer then wraps each step in a "ProfilerStep#N" range).
  bool capturing() const { return active_.has_value(); }

 private:
  struct Active {
    ProfileRequest request;
    int64_t first_step = 0;
    int64_t steps = 0;
    double started = 0;  // steady seconds
    std::shared_ptr<ProfileRecorder> recorder;
    std::shared_ptr<c10::DebugInfoGuard> guard;  // makes the recorder the allocator's reporter
  };
  FinishedProfile Stop(Active active);

  std::string dir_;
  std::string request_path_;
  std::set<int64_t> profile_at_;
  int64_t profile_steps_;
  std::set<std::string> answered_;
  std::vector<ProfileRequest> due_;  // train.profile_at captures waiting for an empty dir
  std::optional<Active> active_;
};

}  // namespace tae::train
