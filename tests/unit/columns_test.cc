// The columnar form of metric points (common/api/columns.h): every point back bit for bit through
// each coding, the narrowest exact coding chosen, damage refused, version 1 still read.

#include "common/api/columns.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace tae::api {
namespace {

uint64_t Bits(double d) {
  uint64_t b = 0;
  std::memcpy(&b, &d, 8);
  return b;
}

double FromBits(uint64_t b) {
  double d = 0;
  std::memcpy(&d, &b, 8);
  return d;
}

struct Study {
  nlohmann::ordered_json header;
  PointColumns columns;
};

// Runs of random lengths (some empty) whose steps, values and wall times are drawn from `kind`:
// 0 ordinary training logs, 1 float32 values, 2 anything (int64 edges, NaN payloads, -0.0, inf,
// huge jumps).
Study RandomStudy(std::mt19937_64& rng, int kind) {
  Study s;
  s.header = {{"experiment", 7}, {"metric", "train/loss"}};
  nlohmann::ordered_json runs = nlohmann::ordered_json::array();
  const int n_runs = std::uniform_int_distribution<int>(0, 12)(rng);
  std::uniform_int_distribution<uint64_t> any;
  std::uniform_real_distribution<double> unit(0, 1);
  for (int r = 0; r < n_runs; ++r) {
    const int count = std::uniform_int_distribution<int>(0, 3)(rng) == 0
                          ? 0
                          : std::uniform_int_distribution<int>(1, 300)(rng);
    runs.push_back({{"run", r + 1}, {"count", count}, {"final", true}});
    int64_t step = std::uniform_int_distribution<int64_t>(-3, 100)(rng);
    double wall = 1.79e9 + unit(rng) * 1e5;
    const int every = std::uniform_int_distribution<int>(1, 200)(rng);
    for (int i = 0; i < count; ++i) {
      double value = 3.0 * std::exp(-unit(rng)) + 0.1 * unit(rng);
      if (kind == 1) {
        value = static_cast<float>(value);
      }
      if (kind == 2) {
        switch (std::uniform_int_distribution<int>(0, 9)(rng)) {
          case 0:
            step = static_cast<int64_t>(any(rng));
            break;
          case 1:
            step = std::numeric_limits<int64_t>::min() + (i % 3);
            break;
          case 2:
            step = std::numeric_limits<int64_t>::max() - (i % 3);
            break;
          case 3:
            value = FromBits(0x7ff0000000000000ULL | (any(rng) & 0x000fffffffffffffULL) | 1);
            break;  // a NaN with its own payload
          case 4:
            value = -0.0;
            break;
          case 5:
            value = -std::numeric_limits<double>::infinity();
            break;
          case 6:
            wall = FromBits(any(rng));
            break;
          case 7:
            value = 1e300;
            break;
          default:
            break;
        }
      }
      s.columns.steps.push_back(step);
      s.columns.values.push_back(value);
      s.columns.walls.push_back(wall);
      step += every;
      wall += 0.01 + unit(rng);
    }
  }
  s.header["runs"] = runs;
  return s;
}

nlohmann::json Column(const std::string& body, size_t i) {
  PointColumns unused;
  absl::StatusOr<nlohmann::json> header = DecodeColumns(body, &unused);
  REQUIRE(header.ok());
  return (*header)["columns"][i];
}

void RequireSame(const PointColumns& a, const PointColumns& b) {
  REQUIRE(a.steps == b.steps);
  REQUIRE(a.values.size() == b.values.size());
  REQUIRE(a.walls.size() == b.walls.size());
  for (size_t i = 0; i < a.values.size(); ++i) {
    REQUIRE(Bits(a.values[i]) == Bits(b.values[i]));
    REQUIRE(Bits(a.walls[i]) == Bits(b.walls[i]));
  }
}

TEST_CASE("columns: every point comes back bit for bit, whatever the coding") {
  std::mt19937_64 rng(20261206);
  int delta_steps = 0;
  int f4_values = 0;
  int plain_steps = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const int kind = trial % 3;
    Study s = RandomStudy(rng, kind);
    const std::string body = EncodeColumns(s.header, s.columns);
    REQUIRE(!body.empty());
    REQUIRE(body.substr(0, 8) == kColumnsMagic);
    REQUIRE(body.size() % 8 == 0);
    PointColumns back;
    absl::StatusOr<nlohmann::json> header = DecodeColumns(body, &back);
    REQUIRE(header.ok());
    RequireSame(s.columns, back);
    REQUIRE((*header)["points"] == s.columns.steps.size());
    REQUIRE((*header)["metric"] == "train/loss");
    REQUIRE((*header)["runs"].size() == s.header["runs"].size());
    const nlohmann::json steps = (*header)["columns"][0];
    const nlohmann::json values = (*header)["columns"][1];
    delta_steps += steps["coding"] == "delta";
    plain_steps += steps["coding"] == "plain";
    f4_values += values["coding"] == "f4";
    if (kind == 0 && !s.columns.steps.empty()) {
      CHECK(values["coding"] == "plain");  // doubles that are not float32s
    }
    if (kind == 1 && !s.columns.steps.empty()) {
      CHECK(values["coding"] == "f4");
    }
  }
  CHECK(delta_steps > 100);
  CHECK(plain_steps > 50);  // the int64 edges do not fit 4 bytes
  CHECK(f4_values > 100);
}

TEST_CASE("columns: the narrowest width that holds every delta within a run") {
  PointColumns c;
  nlohmann::ordered_json runs = nlohmann::ordered_json::array();
  // Two runs of steps 1..1000 (deltas 1, one byte; the second run's start is 999 below the
  // first's end, which one byte cannot chain), walls 0.05 s apart (4 bytes), float32 values.
  for (int r = 0; r < 2; ++r) {
    runs.push_back({{"run", r + 1}, {"count", 1000}});
    for (int i = 1; i <= 1000; ++i) {
      c.steps.push_back(i);
      c.values.push_back(static_cast<float>(1.0 / i));
      c.walls.push_back(1.8e9 + r * 3600 + 0.05 * i);
    }
  }
  const std::string body = EncodeColumns({{"runs", runs}}, c);
  CHECK(Column(body, 0)["coding"] == "delta");
  CHECK(Column(body, 0)["width"] == 1);
  CHECK(Column(body, 1)["coding"] == "f4");
  CHECK(Column(body, 2)["coding"] == "delta");
  CHECK(Column(body, 2)["width"] == 4);
  // 2 runs x 8 bytes of firsts + 2,000 one-byte deltas, padded; 4-byte values; 4-byte walls.
  CHECK(Column(body, 0)["bytes"] == 2016);
  CHECK(Column(body, 1)["bytes"] == 8000);
  CHECK(Column(body, 2)["bytes"] == 8016);
  PointColumns back;
  REQUIRE(DecodeColumns(body, &back).ok());
  RequireSame(c, back);

  // A step delta of 128 needs two bytes; one of 2^31 is plain.
  c.steps[5] = c.steps[4] + 128;
  CHECK(Column(EncodeColumns({{"runs", runs}}, c), 0)["width"] == 2);
  c.steps[5] = c.steps[4] + (int64_t{1} << 31);
  CHECK(Column(EncodeColumns({{"runs", runs}}, c), 0)["coding"] == "plain");
  // A value that is not a float32 makes the values plain.
  c.values[1999] = 0.1;
  CHECK(Column(EncodeColumns({{"runs", runs}}, c), 1)["coding"] == "plain");
  REQUIRE(DecodeColumns(EncodeColumns({{"runs", runs}}, c), &back).ok());
  RequireSame(c, back);
}

TEST_CASE("columns: a damaged or truncated body is refused, a version-1 body is read") {
  std::mt19937_64 rng(7);
  Study s;
  do {
    s = RandomStudy(rng, 0);
  } while (s.columns.steps.size() < 10);
  const std::string body = EncodeColumns(s.header, s.columns);
  PointColumns out;
  for (size_t cut : {size_t{0}, size_t{5}, size_t{13}, body.size() / 2, body.size() - 8}) {
    CHECK(!DecodeColumns(body.substr(0, cut), &out).ok());
  }
  CHECK(!DecodeColumns(body + std::string(8, '\0'), &out).ok());
  std::string other = body;
  other[6] = '9';
  CHECK(!DecodeColumns(other, &out).ok());
  // Runs whose counts do not add up to the points: refused by the writer, not written wrong.
  nlohmann::ordered_json wrong = s.header;
  wrong["runs"][0]["count"] = wrong["runs"][0]["count"].get<int>() + 1;
  CHECK(EncodeColumns(wrong, s.columns).empty());

  // Version 1: the magic, the header, three plain columns.
  const size_t n = s.columns.steps.size();
  std::string text = nlohmann::ordered_json{{"points", n}}.dump();
  std::string v1(kColumnsMagicV1);
  const auto length = static_cast<uint32_t>(text.size());
  for (int i = 0; i < 4; ++i) {
    v1.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  }
  v1 += text;
  v1.append((8 - v1.size() % 8) % 8, '\0');
  v1.append(reinterpret_cast<const char*>(s.columns.steps.data()), n * 8);
  v1.append(reinterpret_cast<const char*>(s.columns.values.data()), n * 8);
  v1.append(reinterpret_cast<const char*>(s.columns.walls.data()), n * 8);
  PointColumns back;
  REQUIRE(DecodeColumns(v1, &back).ok());
  RequireSame(s.columns, back);
}

TEST_CASE("columns: runs written in parts on several threads decode as written in one") {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 200; ++trial) {
    Study s = RandomStudy(rng, trial % 3);
    const size_t runs = s.header["runs"].size();
    std::vector<size_t> at = {0};  // each run's first point
    for (const auto& run : s.header["runs"]) {
      at.push_back(at.back() + run["count"].get<size_t>());
    }
    ColumnsEncoder encoder;
    for (size_t r = 0; r < runs; ++r) {
      encoder.Plan(s.columns.steps.data() + at[r], s.columns.values.data() + at[r],
                   s.columns.walls.data() + at[r], at[r + 1] - at[r]);
    }
    encoder.Start(s.header);
    // Parts of random lengths, each on its own thread, started in reverse order.
    std::vector<size_t> cuts = {0};
    while (cuts.back() < runs) {
      cuts.push_back(
          std::min(runs, cuts.back() + std::uniform_int_distribution<size_t>(1, 4)(rng)));
    }
    std::vector<std::thread> threads;
    for (size_t p = cuts.size() - 1; p-- > 0;) {
      threads.emplace_back([&, p] {
        ColumnsEncoder::Part part = encoder.PartAt(cuts[p]);
        for (size_t r = cuts[p]; r < cuts[p + 1]; ++r) {
          CHECK(part.Write(s.columns.steps.data() + at[r], s.columns.values.data() + at[r],
                           s.columns.walls.data() + at[r], at[r + 1] - at[r]));
        }
      });
    }
    for (std::thread& t : threads) {
      t.join();
    }
    const std::string body = encoder.Finish();
    REQUIRE(!body.empty());
    PointColumns back;
    REQUIRE(DecodeColumns(body, &back).ok());
    RequireSame(s.columns, back);
  }
}

TEST_CASE("columns: the encoder refuses a second pass that is not the first's runs") {
  const std::vector<int64_t> steps = {1, 2, 3};
  const std::vector<double> values = {1, 2, 3};
  ColumnsEncoder encoder;
  encoder.Plan(steps.data(), values.data(), values.data(), 3);
  encoder.Start({{"runs", {{{"run", 1}, {"count", 3}}}}});
  encoder.Write(steps.data(), values.data(), values.data(), 2);
  CHECK(encoder.Finish().empty());  // 2 points where 3 were planned

  // Bounds that were wrong (a step delta of 1000 planned as at most 1): refused, not cut short.
  const std::vector<int64_t> jump = {0, 1000, 1001};
  const std::vector<double> same = {5, 5, 5};
  ColumnsEncoder lied;
  lied.PlanBounds(3, 1, 0, false);  // the walls (all 5) do fit
  lied.Start({{"runs", {{{"run", 1}, {"count", 3}}}}});
  CHECK(!lied.PartAt(0).Write(jump.data(), values.data(), same.data(), 3));
  CHECK(lied.Finish().empty());

  // A run left unwritten, or a part past the planned runs.
  for (int k = 0; k < 2; ++k) {
    ColumnsEncoder two;
    two.Plan(steps.data(), values.data(), values.data(), 3);
    two.Plan(steps.data(), values.data(), values.data(), 1);
    two.Start({{"runs", {{{"run", 1}, {"count", 3}}, {{"run", 2}, {"count", 1}}}}});
    ColumnsEncoder::Part first = two.PartAt(0);
    CHECK(first.Write(steps.data(), values.data(), values.data(), 3));
    if (k == 1) {
      CHECK(first.Write(steps.data(), values.data(), values.data(), 1));
      CHECK(!first.Write(steps.data(), values.data(), values.data(), 1));          // no run left
      CHECK(!two.PartAt(1).Write(steps.data(), values.data(), values.data(), 1));  // written
      CHECK(!two.Finish().empty());
    } else {
      CHECK(two.Finish().empty());  // run 2 not written
    }
  }
}

}  // namespace
}  // namespace tae::api
