#include "common/api/columns.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace tae::api {
namespace {

static_assert(sizeof(double) == 8 && sizeof(int64_t) == 8, "8-byte columns");

// Little-endian on the machines TAE runs on (x86-64, aarch64); checked once at start.
bool LittleEndian() {
  const uint32_t one = 1;
  unsigned char first = 0;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

}  // namespace

ColumnsBody StartColumns(nlohmann::ordered_json header, size_t points) {
  ColumnsBody out;
  if (!LittleEndian()) {
    // Not a machine TAE builds for; refuse rather than write a body no reader can read.
    return out;
  }
  header["points"] = points;
  header["columns"] = nlohmann::ordered_json::array({
      {{"name", "step"}, {"dtype", "<i8"}},
      {{"name", "value"}, {"dtype", "<f8"}},
      {{"name", "wall_time"}, {"dtype", "<f8"}},
  });
  const std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const size_t head = kColumnsMagic.size() + 4 + text.size();
  const size_t padding = (8 - head % 8) % 8;
  out.body.reserve(head + padding + points * 24);
  out.body.append(kColumnsMagic);
  const uint32_t length = static_cast<uint32_t>(text.size());
  for (int i = 0; i < 4; ++i) {
    out.body.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  }
  out.body.append(text);
  out.body.append(padding, '\0');
  out.steps_at = out.body.size();
  out.values_at = out.steps_at + points * 8;
  out.walls_at = out.values_at + points * 8;
  out.body.resize(out.walls_at + points * 8);
  return out;
}

std::string EncodeColumns(nlohmann::ordered_json header, const PointColumns& columns) {
  const size_t n = columns.steps.size();
  ColumnsBody out = StartColumns(std::move(header), n);
  if (out.body.empty() || n == 0) {
    return std::move(out.body);
  }
  std::memcpy(out.body.data() + out.steps_at, columns.steps.data(), n * 8);
  std::memcpy(out.body.data() + out.values_at, columns.values.data(), n * 8);
  std::memcpy(out.body.data() + out.walls_at, columns.walls.data(), n * 8);
  return std::move(out.body);
}

absl::StatusOr<nlohmann::json> DecodeColumns(std::string_view body, PointColumns* out) {
  if (body.size() < kColumnsMagic.size() + 4 ||
      body.substr(0, kColumnsMagic.size()) != kColumnsMagic) {
    return absl::DataLossError("not a TAE columns body (no TAECOL1 magic)");
  }
  uint32_t length = 0;
  for (int i = 0; i < 4; ++i) {
    length |= static_cast<uint32_t>(static_cast<unsigned char>(body[kColumnsMagic.size() + i]))
              << (8 * i);
  }
  const size_t head = kColumnsMagic.size() + 4 + length;
  if (body.size() < head) {
    return absl::DataLossError("columns body: the header runs past the end");
  }
  nlohmann::json header =
      nlohmann::json::parse(body.substr(kColumnsMagic.size() + 4, length), nullptr, false);
  if (!header.is_object() || !header.contains("points") || !header["points"].is_number_unsigned()) {
    return absl::DataLossError("columns body: the header is not an object with \"points\"");
  }
  const size_t n = header["points"].get<size_t>();
  const size_t start = head + (8 - head % 8) % 8;
  if (n > (body.size() / 24) || body.size() != start + n * 24) {
    return absl::DataLossError(absl::StrCat("columns body: ", body.size(), " bytes, not the ",
                                            start + n * 24, " that ", n, " points take"));
  }
  out->steps.resize(n);
  out->values.resize(n);
  out->walls.resize(n);
  if (n > 0) {
    std::memcpy(out->steps.data(), body.data() + start, n * 8);
    std::memcpy(out->values.data(), body.data() + start + n * 8, n * 8);
    std::memcpy(out->walls.data(), body.data() + start + n * 16, n * 8);
  }
  return header;
}

}  // namespace tae::api
