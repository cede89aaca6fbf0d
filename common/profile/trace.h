#pragma once

// Chrome trace JSON (the chrome://tracing / Perfetto format that tae-train, torch.profiler and
// torch_xla write) read back for taectl profile (docs/profiles.md): the operator ranges, where
// each range's time goes, and a flame chart. Pure functions over the file's text.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tae::profile {

// One complete event ("ph": "X"), with what the nesting on its thread says about it.
struct Range {
  std::string name;
  int64_t lane = 0;  // index into Trace::lanes
  double start_us = 0;
  double dur_us = 0;
  double self_us = 0;    // dur minus the ranges directly inside it
  int depth = 0;         // 0: outermost on its lane
  std::string category;  // Category(name), or the category it inherits (see Category)
};

struct Trace {
  std::vector<std::string> lanes;    // "pid/tid" of each thread with ranges, in first-seen order
  std::vector<Range> ranges;         // sorted by lane, then start (outer before inner)
  double peak_allocated_bytes = -1;  // max "Total Allocated" of "[memory]" events; -1: none
  int64_t memory_events = 0;
};

// The trace in `text`: a JSON array of events or an object with "traceEvents". InvalidArgument
// (naming what is wrong) when it is neither.
absl::StatusOr<Trace> ParseTrace(const std::string& text);

// What an operator is, for the summary's shares: "matmul" (mm, addmm, bmm, matmul, linear,
// baddbmm, einsum, their backward), "attention" (softmax, scaled dot-product attention, masking),
// "elementwise" (add, mul, activations, copies, norms, ...), "optimizer" (a range named
// "Optimizer..." or an optimizer's own op), "step" (ProfilerStep#N, autograd's wrappers) or
// "other". ParseTrace gives a range inside an optimizer, matmul or attention range its parent's
// category instead (`inside_optimizer` forces "optimizer").
std::string Category(const std::string& name, bool inside_optimizer);

struct OpTotal {
  std::string name;
  int64_t calls = 0;
  double self_us = 0;
  double total_us = 0;
};

struct Summary {
  int64_t ranges = 0;
  double self_us = 0;                         // all self time (the time ranges cover)
  std::vector<OpTotal> top;                   // by self time, largest first
  std::map<std::string, double> category_us;  // self time per Category
  int64_t steps = 0;                          // ProfilerStep#N ranges
  double peak_allocated_bytes = -1;
};

Summary Summarize(const Trace& trace, size_t top_n);

// Plain-text summary (taectl profile): top ops, category shares, allocator peak.
std::string FormatSummary(const Summary& summary);

struct FlameOptions {
  std::string title;
  int width = 1200;
  int max_lanes = 8;
};

// The trace as a flame chart (time left to right, nesting downwards, one band per thread),
// a standalone deterministic SVG document. Ranges narrower than a third of a pixel are left out
// (and counted in the subtitle).
std::string RenderFlameSvg(const Trace& trace, const FlameOptions& options);

}  // namespace tae::profile
