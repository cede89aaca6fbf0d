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

template <typename T>
void Append(std::string* out, const std::vector<T>& column) {
  const size_t at = out->size();
  out->resize(at + column.size() * sizeof(T));
  if (!column.empty()) {
    std::memcpy(out->data() + at, column.data(), column.size() * sizeof(T));
  }
}

}  // namespace

std::string EncodeColumns(nlohmann::ordered_json header, const PointColumns& columns) {
  if (!LittleEndian()) {
    // Not a machine TAE builds for; refuse rather than write a body no reader can read.
    return std::string();
  }
  header["points"] = columns.steps.size();
  header["columns"] = nlohmann::ordered_json::array({
      {{"name", "step"}, {"dtype", "<i8"}},
      {{"name", "value"}, {"dtype", "<f8"}},
      {{"name", "wall_time"}, {"dtype", "<f8"}},
  });
  const std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  const size_t head = kColumnsMagic.size() + 4 + text.size();
  const size_t padding = (8 - head % 8) % 8;
  out.reserve(head + padding + columns.steps.size() * 24);
  out.append(kColumnsMagic);
  const uint32_t length = static_cast<uint32_t>(text.size());
  for (int i = 0; i < 4; ++i) {
    out.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  }
  out.append(text);
  out.append(padding, '\0');
  Append(&out, columns.steps);
  Append(&out, columns.values);
  Append(&out, columns.walls);
  return out;
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
