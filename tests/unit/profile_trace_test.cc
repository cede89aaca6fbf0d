// common/profile: Chrome trace JSON read back for taectl profile (docs/profiles.md).

#include <catch2/catch.hpp>
#include <string>

#include "common/profile/trace.h"

namespace tae::profile {
namespace {

// One step on one thread: a linear (an addmm inside), a softmax, and the optimizer's step with
// an add inside; a second thread with one mm; memory events peaking at 3000 bytes.
constexpr char kTrace[] = R"({"traceEvents": [
  {"name": "ProfilerStep#7", "ph": "X", "ts": 0, "dur": 100, "pid": 0, "tid": 1},
  {"name": "aten::linear", "ph": "X", "ts": 10, "dur": 40, "pid": 0, "tid": 1},
  {"name": "aten::addmm", "ph": "X", "ts": 15, "dur": 30, "pid": 0, "tid": 1},
  {"name": "aten::softmax", "ph": "X", "ts": 55, "dur": 10, "pid": 0, "tid": 1},
  {"name": "Optimizer.step", "ph": "X", "ts": 70, "dur": 25, "pid": 0, "tid": 1},
  {"name": "aten::add_", "ph": "X", "ts": 72, "dur": 20, "pid": 0, "tid": 1},
  {"name": "MmBackward0", "ph": "X", "ts": 5, "dur": 8, "pid": 0, "tid": "worker"},
  {"name": "[memory]", "ph": "i", "ts": 11, "pid": 0, "tid": 1,
   "args": {"Bytes": 2000, "Total Allocated": 2000}},
  {"name": "[memory]", "ph": "i", "ts": 12, "pid": 0, "tid": 1,
   "args": {"Bytes": 1000, "Total Allocated": 3000}},
  {"name": "[memory]", "ph": "i", "ts": 50, "pid": 0, "tid": 1,
   "args": {"Bytes": -2000, "Total Allocated": 1000}},
  {"name": "counter", "ph": "C", "ts": 1, "pid": 0, "tid": 1}
]})";

TEST_CASE("a trace's ranges nest per thread and their self time excludes what they contain") {
  absl::StatusOr<Trace> trace = ParseTrace(kTrace);
  REQUIRE(trace.ok());
  REQUIRE(trace->ranges.size() == 7);
  CHECK(trace->lanes == std::vector<std::string>{"0/1", "0/worker"});
  std::map<std::string, const Range*> by_name;
  for (const Range& r : trace->ranges) {
    by_name[r.name] = &r;
  }
  CHECK(by_name["ProfilerStep#7"]->self_us == 100 - 40 - 10 - 25);
  CHECK(by_name["aten::linear"]->self_us == 10);
  CHECK(by_name["aten::linear"]->depth == 1);
  CHECK(by_name["aten::addmm"]->depth == 2);
  CHECK(by_name["aten::addmm"]->category == "matmul");
  CHECK(by_name["aten::softmax"]->category == "attention");
  CHECK(by_name["aten::add_"]->category == "optimizer");  // inside Optimizer.step
  CHECK(by_name["MmBackward0"]->category == "matmul");
  CHECK(by_name["MmBackward0"]->depth == 0);  // another thread
  CHECK(trace->peak_allocated_bytes == 3000);
  CHECK(trace->memory_events == 3);
}

TEST_CASE("the summary ranks operators by self time and splits the time by category") {
  absl::StatusOr<Trace> trace = ParseTrace(kTrace);
  REQUIRE(trace.ok());
  const Summary summary = Summarize(*trace, 3);
  CHECK(summary.steps == 1);
  CHECK(summary.self_us == 100 + 8);  // the step's span plus the other thread's range
  REQUIRE(summary.top.size() == 3);
  CHECK(summary.top[0].name == "aten::addmm");
  CHECK(summary.top[0].self_us == 30);
  CHECK(summary.top[1].name == "ProfilerStep#7");
  CHECK(summary.top[2].name == "aten::add_");
  CHECK(summary.category_us.at("matmul") == 30 + 10 + 8);  // addmm, linear's own, mm backward
  CHECK(summary.category_us.at("optimizer") == 5 + 20);
  CHECK(summary.category_us.at("attention") == 10);
  const std::string text = FormatSummary(summary);
  CHECK(text.find("allocator peak (CPU, during the capture): 0.0 MiB") != std::string::npos);
  CHECK(text.find("aten::addmm") != std::string::npos);
}

TEST_CASE("a bare array of events (torch.profiler's export) parses, other JSON is refused") {
  absl::StatusOr<Trace> bare = ParseTrace(
      R"([{"name": "aten::mm", "ph": "X", "ts": 1, "dur": 2, "pid": "CPU functions", "tid": 9}])");
  REQUIRE(bare.ok());
  CHECK(bare->ranges.size() == 1);
  CHECK(bare->peak_allocated_bytes == -1);
  CHECK(ParseTrace("{\"traceEvents\": 3}").status().message() ==
        "trace: expected a JSON array of events or an object with \"traceEvents\"");
  CHECK(ParseTrace("[1, 2").status().message() == "trace: not valid JSON");
}

TEST_CASE("the flame chart draws every range wide enough and is deterministic") {
  absl::StatusOr<Trace> trace = ParseTrace(kTrace);
  REQUIRE(trace.ok());
  FlameOptions options;
  options.title = "r1 <profile>";
  const std::string svg = RenderFlameSvg(*trace, options);
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("r1 &lt;profile&gt;") != std::string::npos);
  size_t rects = 0;
  for (size_t at = svg.find("<rect x="); at != std::string::npos;
       at = svg.find("<rect x=", at + 1)) {
    ++rects;
  }
  CHECK(rects == 7);
  CHECK(svg == RenderFlameSvg(*trace, options));
  CHECK(RenderFlameSvg(Trace{}, options).find("no ranges in this trace") != std::string::npos);
}

}  // namespace
}  // namespace tae::profile
