#include "common/profile/trace.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace tae::profile {
namespace {

using json = nlohmann::json;

// e[key] when it is a string, else "" (a trace from an unknown writer must not throw).
std::string Str(const json& e, const char* key) {
  auto it = e.find(key);
  return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string IdText(const json& value) {
  if (value.is_string()) {
    return value.get<std::string>();
  }
  if (value.is_number_integer()) {
    return absl::StrCat(value.get<int64_t>());
  }
  return value.is_null() ? "0" : value.dump();
}

// "aten::addmm" -> "addmm", "MmBackward0" -> "mm", "aten::add_" -> "add".
std::string BaseName(const std::string& name) {
  const size_t colons = name.rfind("::");
  std::string base =
      absl::AsciiStrToLower(colons == std::string::npos ? name : name.substr(colons + 2));
  for (const char* suffix : {"backward0", "backward1", "backward"}) {
    if (absl::EndsWith(base, suffix)) {
      base.resize(base.size() - std::strlen(suffix));
      break;
    }
  }
  while (!base.empty() && base.back() == '_') {
    base.pop_back();
  }
  while (!base.empty() && base.front() == '_') {
    base.erase(base.begin());
  }
  return base;
}

bool IsOneOf(const std::string& base, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return base == n; });
}

}  // namespace

std::string Category(const std::string& name, bool inside_optimizer) {
  if (inside_optimizer || absl::StartsWith(name, "Optimizer") || absl::StrContains(name, "adamw") ||
      absl::StrContains(name, "_foreach_")) {
    return "optimizer";
  }
  if (absl::StartsWith(name, "ProfilerStep") || absl::StartsWith(name, "autograd::engine")) {
    return "step";
  }
  const std::string base = BaseName(name);
  if (IsOneOf(base, {"mm", "addmm", "bmm", "matmul", "linear", "baddbmm", "einsum", "addmv", "mv",
                     "dot", "addbmm", "mkldnn_linear", "linear_dynamic"}) ||
      absl::StrContains(base, "gemm") || absl::StrContains(base, "dot_general") ||
      absl::StrContains(base, "convolution")) {
    return "matmul";
  }
  if (absl::StrContains(base, "softmax") || absl::StrContains(base, "attention") ||
      IsOneOf(base, {"masked_fill", "tril", "triu", "baddbmm_attention"})) {
    return "attention";
  }
  if (IsOneOf(base, {"add",
                     "sub",
                     "mul",
                     "div",
                     "neg",
                     "pow",
                     "sqrt",
                     "rsqrt",
                     "exp",
                     "log",
                     "tanh",
                     "sigmoid",
                     "relu",
                     "gelu",
                     "silu",
                     "threshold",
                     "where",
                     "copy",
                     "clone",
                     "contiguous",
                     "fill",
                     "zero",
                     "zeros",
                     "ones",
                     "empty_like",
                     "to",
                     "cat",
                     "stack",
                     "mean",
                     "sum",
                     "layer_norm",
                     "native_layer_norm",
                     "norm",
                     "dropout",
                     "native_dropout",
                     "embedding",
                     "embedding_dense",
                     "index_select",
                     "gather",
                     "scatter",
                     "clamp",
                     "abs",
                     "sin",
                     "cos",
                     "addcmul",
                     "addcdiv",
                     "lerp",
                     "maximum",
                     "minimum",
                     "reciprocal",
                     "nll_loss",
                     "nll_loss_forward",
                     "nll_loss_nd",
                     "log_softmax_backward_data",
                     "cross_entropy_loss",
                     "mse_loss",
                     "square",
                     "rsub",
                     "erf",
                     "gelu_backward",
                     "silu_backward",
                     "threshold_backward",
                     "expand",
                     "view",
                     "reshape",
                     "transpose",
                     "t",
                     "permute",
                     "as_strided",
                     "slice",
                     "select",
                     "unsqueeze",
                     "squeeze",
                     "split",
                     "chunk",
                     "narrow",
                     "unbind",
                     "empty",
                     "empty_strided",
                     "resize",
                     "detach",
                     "alias",
                     "_unsafe_view",
                     "unsafe_view"}) ||
      absl::StrContains(base, "norm") || absl::StrContains(base, "elementwise") ||
      absl::StrContains(base, "fusion")) {
    return "elementwise";
  }
  return "other";
}

absl::StatusOr<Trace> ParseTrace(const std::string& text) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return absl::InvalidArgumentError("trace: not valid JSON");
  }
  const json* events = nullptr;
  if (doc.is_array()) {
    events = &doc;
  } else if (doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array()) {
    events = &doc["traceEvents"];
  } else {
    return absl::InvalidArgumentError(
        "trace: expected a JSON array of events or an object with \"traceEvents\"");
  }
  Trace trace;
  std::unordered_map<std::string, int64_t> lane_of;
  for (const json& e : *events) {
    if (!e.is_object()) {
      continue;
    }
    const std::string ph = Str(e, "ph");
    if (ph == "i" || ph == "I") {
      if (Str(e, "name") == "[memory]" && e.contains("args") && e["args"].is_object()) {
        const json& args = e["args"];
        if (args.contains("Total Allocated") && args["Total Allocated"].is_number()) {
          trace.memory_events += 1;
          trace.peak_allocated_bytes =
              std::max(trace.peak_allocated_bytes, args["Total Allocated"].get<double>());
        }
      }
      continue;
    }
    if (ph != "X" || !e.contains("ts") || !e["ts"].is_number() || !e.contains("dur") ||
        !e["dur"].is_number()) {
      continue;
    }
    const std::string lane = absl::StrCat(IdText(e.contains("pid") ? e["pid"] : json()), "/",
                                          IdText(e.contains("tid") ? e["tid"] : json()));
    auto [it, inserted] = lane_of.emplace(lane, static_cast<int64_t>(trace.lanes.size()));
    if (inserted) {
      trace.lanes.push_back(lane);
    }
    Range range;
    range.name = e.contains("name") && e["name"].is_string() ? e["name"].get<std::string>() : "?";
    range.lane = it->second;
    range.start_us = e["ts"].get<double>();
    range.dur_us = std::max(0.0, e["dur"].get<double>());
    trace.ranges.push_back(std::move(range));
  }
  // Outer before inner: by lane, start, then longer first.
  std::stable_sort(trace.ranges.begin(), trace.ranges.end(), [](const Range& a, const Range& b) {
    if (a.lane != b.lane) {
      return a.lane < b.lane;
    }
    if (a.start_us != b.start_us) {
      return a.start_us < b.start_us;
    }
    return a.dur_us > b.dur_us;
  });
  // Nesting per lane: a range is inside the innermost open range that contains it.
  std::vector<size_t> open;
  int64_t lane = -1;
  // Per open range: the category its contents inherit ("" for none): what runs inside an
  // optimizer step, a matmul or an attention op is part of it (libtorch's CPU bmm runs a select
  // and an addmm_ per matrix; those are the matmul's cost, not elementwise work).
  std::vector<std::string> inherited;
  for (size_t i = 0; i < trace.ranges.size(); ++i) {
    Range& r = trace.ranges[i];
    if (r.lane != lane) {
      open.clear();
      inherited.clear();
      lane = r.lane;
    }
    const double end = r.start_us + r.dur_us;
    while (!open.empty()) {
      const Range& outer = trace.ranges[open.back()];
      if (r.start_us >= outer.start_us && end <= outer.start_us + outer.dur_us + 1e-3) {
        break;
      }
      open.pop_back();
      inherited.pop_back();
    }
    r.self_us = r.dur_us;
    if (!open.empty()) {
      Range& parent = trace.ranges[open.back()];
      parent.self_us -= r.dur_us;
    }
    r.depth = static_cast<int>(open.size());
    const std::string outer = inherited.empty() ? std::string() : inherited.back();
    r.category = outer.empty() ? Category(r.name, false) : outer;
    open.push_back(i);
    const bool passes_on =
        r.category == "optimizer" || r.category == "matmul" || r.category == "attention";
    inherited.push_back(passes_on ? r.category : std::string());
  }
  for (Range& r : trace.ranges) {
    r.self_us = std::max(0.0, r.self_us);
  }
  return trace;
}

Summary Summarize(const Trace& trace, size_t top_n) {
  Summary summary;
  summary.ranges = static_cast<int64_t>(trace.ranges.size());
  summary.peak_allocated_bytes = trace.peak_allocated_bytes;
  std::unordered_map<std::string, OpTotal> ops;
  for (const Range& r : trace.ranges) {
    if (absl::StartsWith(r.name, "ProfilerStep#")) {
      summary.steps += 1;
    }
    summary.self_us += r.self_us;
    summary.category_us[r.category] += r.self_us;
    OpTotal& op = ops[r.name];
    op.name = r.name;
    op.calls += 1;
    op.self_us += r.self_us;
    op.total_us += r.dur_us;
  }
  for (auto& [name, op] : ops) {
    summary.top.push_back(std::move(op));
  }
  std::sort(summary.top.begin(), summary.top.end(), [](const OpTotal& a, const OpTotal& b) {
    return a.self_us != b.self_us ? a.self_us > b.self_us : a.name < b.name;
  });
  if (summary.top.size() > top_n) {
    summary.top.resize(top_n);
  }
  return summary;
}

std::string FormatSummary(const Summary& summary) {
  std::string out;
  const double total = summary.self_us > 0 ? summary.self_us : 1;
  absl::StrAppendFormat(&out, "%d ranges, %.1f ms of operator time", summary.ranges,
                        summary.self_us / 1e3);
  if (summary.steps > 0) {
    absl::StrAppendFormat(&out, " over %d steps (%.2f ms/step)", summary.steps,
                          summary.self_us / 1e3 / static_cast<double>(summary.steps));
  }
  out += "\n\ntop operators by self time:\n";
  absl::StrAppendFormat(&out, "  %-44s %8s %10s %7s %10s\n", "OP", "CALLS", "SELF ms", "SELF%",
                        "TOTAL ms");
  for (const OpTotal& op : summary.top) {
    std::string name = op.name.size() > 44 ? op.name.substr(0, 41) + "..." : op.name;
    absl::StrAppendFormat(&out, "  %-44s %8d %10.2f %6.1f%% %10.2f\n", name, op.calls,
                          op.self_us / 1e3, 100.0 * op.self_us / total, op.total_us / 1e3);
  }
  out += "\nshare of operator time:\n";
  for (const char* category :
       {"matmul", "attention", "elementwise", "optimizer", "other", "step"}) {
    auto it = summary.category_us.find(category);
    const double us = it == summary.category_us.end() ? 0 : it->second;
    absl::StrAppendFormat(&out, "  %-12s %6.1f%%  %10.2f ms\n", category, 100.0 * us / total,
                          us / 1e3);
  }
  if (summary.peak_allocated_bytes >= 0) {
    absl::StrAppendFormat(&out, "\nallocator peak (CPU, during the capture): %.1f MiB\n",
                          summary.peak_allocated_bytes / (1024.0 * 1024.0));
  } else {
    out += "\nallocator peak: not in this trace (no memory events)\n";
  }
  return out;
}

}  // namespace tae::profile
