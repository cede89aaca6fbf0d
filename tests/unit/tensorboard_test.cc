#include "common/tensorboard/tensorboard.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace tae::tensorboard {
namespace {

std::string TempDir(const char* name) {
  std::string dir = std::filesystem::temp_directory_path() /
                    absl::StrCat("tae-tensorboard-test-", name, "-", getpid());
  std::filesystem::remove_all(dir);
  return dir;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

uint64_t LittleEndian(const std::string& bytes, size_t at, int size) {
  uint64_t value = 0;
  for (int i = 0; i < size; ++i) {
    value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  }
  return value;
}

std::string DoubleBytes(double value) {
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &value, 8);  // x86-64 and aarch64 are little endian, like protobuf.
  return bytes;
}

// A string literal with its embedded NULs.
template <size_t N>
std::string Bytes(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}

std::string FloatBytes(float value) {
  std::string bytes(4, '\0');
  std::memcpy(bytes.data(), &value, 4);
  return bytes;
}

}  // namespace

TEST_CASE("CRC-32C matches the published check values", "[tensorboard]") {
  CHECK(Crc32c("") == 0x00000000u);
  CHECK(Crc32c("123456789") == 0xE3069283u);
  // RFC 3720 (iSCSI) appendix B.4.
  CHECK(Crc32c(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(Crc32c(std::string(32, '\xFF')) == 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
  }
  CHECK(Crc32c(ascending) == 0x46DD794Eu);
  // ((crc >> 15) | (crc << 17)) + 0xa282ead8, worked out by hand for 0xE3069283.
  CHECK(MaskedCrc32c("123456789") == 0xC78AB0E5u);
}

TEST_CASE("event files are byte for byte what another TensorBoard writer produces",
          "[tensorboard]") {
  // tensorboard_logger's own test expects exactly these bytes for a file started at wall time
  // 256.5 holding v/1 = 1.5 at step 1 and v/22 = 16.0 at step 2, all at wall time 256.5.
  const std::string expected =
      Bytes("\x18\0\0\0\0\0\0\0\xa3\x7fK\"\t\0\0\0\0\0\x08p@\x1a\rbrain.Event:2\xbc\x98!+") +
      Bytes(
          "\x19\0\0\0\0\0\0\0\x8b\xf1\x08(\t\0\0\0\0\0\x08p@\x10\x01*\x0c\n\n\n\x03v/1"
          "\x15\0\0\xc0?,\xec\xc0\x87") +
      Bytes(
          "\x1a\0\0\0\0\0\0\0\x12\x9b\xd8-\t\0\0\0\0\0\x08p@\x10\x02*\r\n\x0b\n\x04v/22"
          "\x15\0\0\x80"
          "A\x8f\xa3\xb6\x88");
  REQUIRE(expected.size() == 40 + 41 + 42);
  std::string dir = TempDir("reference");
  auto path = WriteEventFile(dir, {{"v/1", 1, 256.5, 1.5}, {"v/22", 2, 256.5, 16.0}}, 256.5);
  REQUIRE(path.ok());
  CHECK(ReadBytes(*path) == expected);
  std::filesystem::remove_all(dir);
}

TEST_CASE("one small record has the documented byte layout", "[tensorboard]") {
  std::string dir = TempDir("layout");
  auto path = WriteEventFile(dir, {{"a", 5, 2.0, 0.0}}, 1.0);
  REQUIRE(path.ok());
  std::string bytes = ReadBytes(*path);
  uint64_t first_length = LittleEndian(bytes, 0, 8);
  size_t at = 12 + first_length + 4;  // The scalar record follows the file_version record.

  // Event{wall_time: 2.0 (field 1, fixed64), step: 5 (field 2, varint), summary (field 5):
  // Summary{value (field 1): Value{tag: "a" (field 1), simple_value: 0.0f (field 2, fixed32)}}}.
  // A zero value is still written: simple_value sits in a oneof, as in TensorBoard's proto.
  std::string value = std::string(
                          "\x0a\x01"
                          "a\x15",
                          4) +
                      FloatBytes(0.0f);
  std::string summary = std::string("\x0a\x08", 2) + value;
  std::string event = "\x09" + DoubleBytes(2.0) + std::string("\x10\x05\x2a\x0a", 4) + summary;
  REQUIRE(event.size() == 23);

  REQUIRE(bytes.size() == at + 8 + 4 + event.size() + 4);
  CHECK(LittleEndian(bytes, at, 8) == event.size());
  CHECK(LittleEndian(bytes, at + 8, 4) == MaskedCrc32c(bytes.substr(at, 8)));
  CHECK(bytes.substr(at + 12, event.size()) == event);
  CHECK(LittleEndian(bytes, at + 12 + event.size(), 4) == MaskedCrc32c(event));
  std::filesystem::remove_all(dir);
}

TEST_CASE("the first record is the file_version event at the file's wall time", "[tensorboard]") {
  std::string dir = TempDir("version") + "/nested/run";  // Missing directories are created.
  auto path = WriteEventFile(dir, {}, 1700000000.25);
  REQUIRE(path.ok());
  std::string name = std::filesystem::path(*path).filename();
  CHECK(name.rfind("events.out.tfevents.1700000000.", 0) == 0);
  CHECK(name.size() > std::strlen("events.out.tfevents.1700000000."));
  CHECK(std::filesystem::path(*path).parent_path() == dir);

  std::string bytes = ReadBytes(*path);
  // Event{wall_time (field 1), file_version (field 3)}; step 0 is not written.
  std::string event = "\x09" + DoubleBytes(1700000000.25) + "\x1a\x0d" + "brain.Event:2";
  REQUIRE(bytes.size() == 12 + event.size() + 4);
  CHECK(LittleEndian(bytes, 0, 8) == event.size());
  CHECK(bytes.substr(12, event.size()) == event);

  auto scalars = ReadEventFile(*path);
  REQUIRE(scalars.ok());
  CHECK(scalars->empty());  // The reader skips the file_version event.
  std::filesystem::remove_all(TempDir("version"));
}

TEST_CASE("thousands of scalars under several tags read back as written", "[tensorboard]") {
  std::vector<Scalar> written;
  const char* tags[] = {"train/loss", "eval/loss", "eval/acc", "perf/tokens_per_s"};
  for (int64_t step = 0; step < 1000; ++step) {
    for (int t = 0; t < 4; ++t) {
      double value = (t == 3 ? 81234.567 : 1.0 / (step + 1)) * (t + 1) - (t == 2 ? 0.5 : 0.0);
      written.push_back({tags[t], step * 10, 1700000000.0 + step * 0.125 + t, value});
    }
  }
  written.push_back({"eval/loss", -3, 0.0, -0.0});  // Negative step, zero wall time and value.
  std::string dir = TempDir("round-trip");
  auto path = WriteEventFile(dir, written, 1700000000.0);
  REQUIRE(path.ok());
  auto read = ReadEventFile(*path);
  REQUIRE(read.ok());
  REQUIRE(read->size() == written.size());
  for (size_t i = 0; i < written.size(); ++i) {
    INFO("point " << i);
    CHECK((*read)[i].tag == written[i].tag);
    CHECK((*read)[i].step == written[i].step);
    CHECK((*read)[i].wall_time == written[i].wall_time);
    CHECK(static_cast<float>((*read)[i].value) == static_cast<float>(written[i].value));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("the streaming writer appends records one at a time", "[tensorboard]") {
  std::string dir = TempDir("stream");
  auto writer = EventFileWriter::Create(dir, 10.0);
  REQUIRE(writer.ok());
  for (int64_t step = 0; step < 3; ++step) {
    REQUIRE((*writer)->Append({"x", step, 10.0 + step, step * 2.0}).ok());
  }
  REQUIRE((*writer)->Close().ok());
  auto read = ReadEventFile((*writer)->path());
  REQUIRE(read.ok());
  REQUIRE(read->size() == 3);
  CHECK((*read)[2].step == 2);
  CHECK((*read)[2].value == 4.0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("corrupt and truncated event files are DataLoss errors naming the offset",
          "[tensorboard]") {
  std::string dir = TempDir("corrupt");
  auto path = WriteEventFile(dir, {{"a", 1, 1.0, 1.0}, {"b", 2, 2.0, 2.0}}, 1.0);
  REQUIRE(path.ok());
  const std::string good = ReadBytes(*path);
  const size_t second = 12 + LittleEndian(good, 0, 8) + 4;  // Offset of the first scalar record.
  const size_t third = second + 12 + LittleEndian(good, second, 8) + 4;
  REQUIRE(third < good.size());

  auto error_for = [&](const std::string& bytes) {
    WriteBytes(*path, bytes);
    auto read = ReadEventFile(*path);
    REQUIRE_FALSE(read.ok());
    CHECK(read.status().code() == absl::StatusCode::kDataLoss);
    return std::string(read.status().message());
  };
  using Catch::Matchers::Contains;

  std::string flipped = good;
  flipped[second + 12 + 3] ^= 0x01;  // A byte inside the first scalar's data.
  CHECK_THAT(error_for(flipped),
             Contains("bad data CRC") && Contains(absl::StrCat("byte offset ", second)));

  flipped = good;
  flipped[third] ^= 0x40;  // The length of the last record.
  CHECK_THAT(error_for(flipped),
             Contains("bad length CRC") && Contains(absl::StrCat("byte offset ", third)));

  flipped = good;
  flipped[good.size() - 1] ^= 0x80;  // The stored data CRC of the last record.
  CHECK_THAT(error_for(flipped),
             Contains("bad data CRC") && Contains(absl::StrCat("byte offset ", third)));

  CHECK_THAT(error_for(good.substr(0, good.size() - 1)),
             Contains("truncated data") && Contains(absl::StrCat("byte offset ", third)));
  CHECK_THAT(error_for(good.substr(0, third + 20)),
             Contains("truncated data") && Contains(absl::StrCat("byte offset ", third)));
  CHECK_THAT(error_for(good.substr(0, third + 5)),
             Contains("truncated header") && Contains(absl::StrCat("byte offset ", third)));

  // A record whose CRCs are right but whose data is not an Event.
  std::string junk = "\xff\xff\xff";
  std::string record(12, '\0');
  record[0] = 3;
  uint32_t length_crc = MaskedCrc32c(record.substr(0, 8));
  uint32_t data_crc = MaskedCrc32c(junk);
  for (int i = 0; i < 4; ++i) {
    record[8 + i] = static_cast<char>(length_crc >> (8 * i));
  }
  record += junk;
  for (int i = 0; i < 4; ++i) {
    record.push_back(static_cast<char>(data_crc >> (8 * i)));
  }
  CHECK_THAT(error_for(good + record),
             Contains("not an Event") && Contains(absl::StrCat("byte offset ", good.size())));

  WriteBytes(*path, good);
  CHECK(ReadEventFile(*path).ok());
  std::filesystem::remove_all(dir);
}

TEST_CASE("a missing event file is NotFound", "[tensorboard]") {
  auto read = ReadEventFile(TempDir("missing") + "/events.out.tfevents.1.host");
  REQUIRE_FALSE(read.ok());
  CHECK(read.status().code() == absl::StatusCode::kNotFound);
}

}  // namespace tae::tensorboard
