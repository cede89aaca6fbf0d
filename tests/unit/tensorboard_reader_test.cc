// common/tensorboard's incremental reader (ReadEventRecords), against event files written by
// tests/tensorboard/write_events.py: Python's protobuf runtime, its own TFRecord framing and its
// own CRC-32C, sharing nothing with TAE's writer. And the CRC against published check values.
#include <stdio.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "common/tensorboard/tensorboard.h"
#include "nlohmann/json.hpp"
#include "tests/skip.h"
#include "tests/unit/temp_dir.h"

namespace tae::tensorboard {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST_CASE("tensorboard: CRC-32C matches the published check values") {
  CHECK(Crc32c("123456789") == 0xE3069283u);
  // RFC 3720, B.4.
  CHECK(Crc32c(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(Crc32c(std::string(32, '\xFF')) == 0x62A8AB43u);
  std::string up;
  std::string down;
  for (int i = 0; i < 32; ++i) {
    up.push_back(static_cast<char>(i));
    down.push_back(static_cast<char>(31 - i));
  }
  CHECK(Crc32c(up) == 0x46DD794Eu);
  CHECK(Crc32c(down) == 0x113FDB5Cu);
}

// Reads `data` in pieces ending at each of `cuts` (a writer flushing there), as the agent does:
// each read starts at what the last one consumed.
EventRecords ReadInPieces(const std::string& data, const std::vector<size_t>& cuts) {
  EventRecords all;
  std::map<std::string, std::string> plugins;
  uint64_t at = 0;
  for (size_t cut : cuts) {
    if (cut < at) {
      continue;
    }
    EventRecords part = ReadEventRecords(std::string_view(data).substr(at, cut - at), at, &plugins);
    all.scalars.insert(all.scalars.end(), part.scalars.begin(), part.scalars.end());
    all.warnings.insert(all.warnings.end(), part.warnings.begin(), part.warnings.end());
    at += part.consumed;
  }
  all.consumed = at;
  return all;
}

TEST_CASE(
    "tensorboard: event files written by an independent writer read as it says, whole or "
    "in any pieces") {
  if (system("/usr/bin/python3 -c 'import google.protobuf' 2>/dev/null") != 0) {
    TAE_SKIP("python3-protobuf is not installed (deploy/install-deps.sh installs it)");
  }
  testing::TempDir dir;
  const std::string command = "/usr/bin/python3 " TAE_TEST_DATA_DIR
                              "/../tensorboard/write_events.py " +
                              dir.path() + " 2>&1";
  REQUIRE(system(command.c_str()) == 0);
  const nlohmann::json expected = nlohmann::json::parse(ReadAll(dir.path() + "/expected.json"));
  REQUIRE(expected.size() == 5);
  for (const auto& [name, file] : expected.items()) {
    INFO(name);
    const std::string data = ReadAll(dir.path() + "/" + name);
    REQUIRE(data.size() == file.at("size").get<size_t>());
    // Whole, then cut every 7 bytes, then byte by byte up to the end.
    std::vector<size_t> sevens;
    for (size_t cut = 7; cut < data.size(); cut += 7) {
      sevens.push_back(cut);
    }
    sevens.push_back(data.size());
    std::vector<size_t> bytes;
    for (size_t cut = 1; cut <= data.size(); ++cut) {
      bytes.push_back(cut);
    }
    for (const std::vector<size_t>& cuts : {std::vector<size_t>{data.size()}, sevens, bytes}) {
      INFO(cuts.size() << " reads");
      const EventRecords read = ReadInPieces(data, cuts);
      const nlohmann::json& want = file.at("scalars");
      REQUIRE(read.scalars.size() == want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        INFO("scalar " << i);
        CHECK(read.scalars[i].tag == want[i].at("tag").get<std::string>());
        CHECK(read.scalars[i].step == want[i].at("step").get<int64_t>());
        CHECK(read.scalars[i].wall_time == want[i].at("wall_time").get<double>());
        const double value = want[i].at("value").get<double>();
        CHECK(read.scalars[i].value == Approx(value).epsilon(1e-12).margin(0));
      }
      if (file.contains("torn_at")) {
        CHECK(read.consumed == file.at("torn_at").get<uint64_t>());  // waits for the writer
      } else {
        CHECK(read.consumed == data.size());
      }
      if (cuts.size() > 1) {
        continue;  // a run of garbage split across reads is named once per read
      }
      std::vector<uint64_t> named;
      for (const std::string& warning : read.warnings) {
        uint64_t offset = 0;
        REQUIRE(sscanf(warning.c_str(), "byte offset %lu:", &offset) == 1);
        named.push_back(offset);
      }
      CHECK(named == file.value("skipped_offsets", std::vector<uint64_t>{}));
    }
  }
}

TEST_CASE("tensorboard: TAE's own exporter's files read back through the incremental reader") {
  testing::TempDir dir;
  std::vector<Scalar> scalars = {{"train/loss", 1, 1.7e9, 2.5}, {"eval/acc", 1, 1.7e9, 0.0}};
  absl::StatusOr<std::string> path = WriteEventFile(dir.path(), scalars, 1.7e9);
  REQUIRE(path.ok());
  std::map<std::string, std::string> plugins;
  const std::string data = ReadAll(*path);
  EventRecords read = ReadEventRecords(data, 0, &plugins);
  REQUIRE(read.scalars.size() == 2);
  CHECK(read.scalars[0].tag == "train/loss");
  CHECK(read.scalars[1].value == 0.0);
  CHECK(read.consumed == data.size());
}

}  // namespace
}  // namespace tae::tensorboard
