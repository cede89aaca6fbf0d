#include "common/api/columns.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/api/exact.h"
#include "common/status/macros.h"

namespace tae::api {
namespace {

static_assert(sizeof(double) == 8 && sizeof(int64_t) == 8 && sizeof(float) == 4,
              "8- and 4-byte columns");

// Little-endian on the machines TAE runs on (x86-64, aarch64).
bool LittleEndian() {
  const uint32_t one = 1;
  unsigned char first = 0;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

size_t Pad8(size_t n) { return n + (8 - n % 8) % 8; }

bool Fits(uint64_t delta, int width) {
  return DeltaMagnitude(delta) < (uint64_t{1} << (8 * width - 1));
}

void StoreDelta(char* at, int width, uint64_t delta) {
  switch (width) {
    case 1: {
      const auto d = static_cast<int8_t>(static_cast<int64_t>(delta));
      std::memcpy(at, &d, 1);
      break;
    }
    case 2: {
      const auto d = static_cast<int16_t>(static_cast<int64_t>(delta));
      std::memcpy(at, &d, 2);
      break;
    }
    default: {
      const auto d = static_cast<int32_t>(static_cast<int64_t>(delta));
      std::memcpy(at, &d, 4);
      break;
    }
  }
}

uint64_t LoadDelta(const char* at, int width) {
  switch (width) {
    case 1: {
      int8_t d = 0;
      std::memcpy(&d, at, 1);
      return static_cast<uint64_t>(static_cast<int64_t>(d));
    }
    case 2: {
      int16_t d = 0;
      std::memcpy(&d, at, 2);
      return static_cast<uint64_t>(static_cast<int64_t>(d));
    }
    default: {
      int32_t d = 0;
      std::memcpy(&d, at, 4);
      return static_cast<uint64_t>(static_cast<int64_t>(d));
    }
  }
}

}  // namespace

void ColumnsEncoder::Int::Note(const uint64_t* bits, size_t n) {
  for (size_t i = 1; i < n; ++i) {
    max_magnitude = std::max(max_magnitude, DeltaMagnitude(bits[i] - bits[i - 1]));
  }
}

void ColumnsEncoder::Int::Choose(size_t points, size_t runs) {
  width = 8;
  for (int w : {1, 2, 4}) {
    if (max_magnitude < (uint64_t{1} << (8 * w - 1)) && Pad8(runs * 8 + w * points) < points * 8) {
      width = w;
      return;
    }
  }
}

size_t ColumnsEncoder::Int::Bytes(size_t points, size_t runs) const {
  return width == 8 ? points * 8 : Pad8(runs * 8 + static_cast<size_t>(width) * points);
}

void ColumnsEncoder::Plan(const int64_t* steps, const double* values, const double* walls,
                          size_t n) {
  steps_.Note(reinterpret_cast<const uint64_t*>(steps), n);
  bits_.resize(n);
  if (n > 0) {
    std::memcpy(bits_.data(), walls, n * 8);
  }
  walls_.Note(bits_.data(), n);
  for (size_t i = 0; values_f4_ && i < n; ++i) {
    values_f4_ = IsFloat32(values[i]);
  }
  planned_points_ += n;
  ++planned_runs_;
  planned_counts_.push_back(n);
}

void ColumnsEncoder::PlanBounds(size_t n, uint64_t step_bound, uint64_t wall_bound,
                                bool values_float) {
  steps_.max_magnitude = std::max(steps_.max_magnitude, step_bound);
  walls_.max_magnitude = std::max(walls_.max_magnitude, wall_bound);
  values_f4_ = values_f4_ && values_float;
  planned_points_ += n;
  ++planned_runs_;
  planned_counts_.push_back(n);
}

void ColumnsEncoder::Start(nlohmann::ordered_json header) {
  body_.clear();
  if (!LittleEndian()) {
    return;  // not a machine TAE builds for: Finish refuses
  }
  const size_t n = planned_points_;
  const size_t r = planned_runs_;
  const nlohmann::ordered_json* runs = header.contains("runs") ? &header["runs"] : nullptr;
  if (runs == nullptr || !runs->is_array() || runs->size() != r) {
    return;  // Finish refuses
  }
  for (size_t i = 0; i < r; ++i) {
    const auto& count = (*runs)[i];
    if (!count.is_object() || !count.contains("count") || !count["count"].is_number_integer() ||
        count["count"].get<int64_t>() != static_cast<int64_t>(planned_counts_[i])) {
      return;
    }
  }
  steps_.Choose(n, r);
  walls_.Choose(n, r);
  auto describe = [](const char* name, const char* dtype, const Int& column, size_t bytes) {
    nlohmann::ordered_json c = {{"name", name}, {"dtype", dtype}};
    if (column.width == 8) {
      c["coding"] = "plain";
    } else {
      c["coding"] = "delta";
      c["width"] = column.width;
    }
    c["bytes"] = bytes;
    return c;
  };
  const size_t steps_bytes = steps_.Bytes(n, r);
  const size_t values_bytes = values_f4_ ? Pad8(n * 4) : n * 8;
  const size_t walls_bytes = walls_.Bytes(n, r);
  header["points"] = n;
  header["columns"] =
      nlohmann::ordered_json::array({describe("step", "<i8", steps_, steps_bytes),
                                     {{"name", "value"},
                                      {"dtype", "<f8"},
                                      {"coding", values_f4_ ? "f4" : "plain"},
                                      {"bytes", values_bytes}},
                                     describe("wall_time", "<f8", walls_, walls_bytes)});
  const std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const size_t head = Pad8(kColumnsMagic.size() + 4 + text.size());
  body_.reserve(head + steps_bytes + values_bytes + walls_bytes);
  body_.append(kColumnsMagic);
  const auto length = static_cast<uint32_t>(text.size());
  for (int i = 0; i < 4; ++i) {
    body_.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  }
  body_.append(text);
  body_.resize(head, '\0');
  auto place = [&](Int* column, size_t at) {
    column->firsts_at = at;
    column->deltas_at = column->width == 8 ? at : at + r * 8;
  };
  place(&steps_, head);
  values_at_ = head + steps_bytes;
  place(&walls_, values_at_ + values_bytes);
  body_.resize(walls_.firsts_at + walls_bytes, '\0');
  offsets_.assign(r + 1, 0);
  for (size_t i = 0; i < r; ++i) {
    offsets_[i + 1] = offsets_[i] + planned_counts_[i];
  }
  written_.assign(r, 0);
  sequential_ = PartAt(0);
}

bool ColumnsEncoder::Put(const Int& column, const void* src, size_t n, size_t run, size_t point,
                         uint64_t* last, bool chained) {
  char* base = body_.data();
  const auto* bytes = static_cast<const char*>(src);
  if (column.width == 8) {
    if (n > 0) {
      std::memcpy(base + column.deltas_at + point * 8, src, n * 8);
    }
    return true;
  }
  auto at_index = [&](size_t i) {
    uint64_t v = 0;
    std::memcpy(&v, bytes + i * 8, 8);
    return v;
  };
  const uint64_t first = n > 0 ? at_index(0) : 0;
  std::memcpy(base + column.firsts_at + run * 8, &first, 8);
  const int w = column.width;
  char* at = base + column.deltas_at + point * static_cast<size_t>(w);
  uint64_t previous = first;
  for (size_t i = 0; i < n; ++i, at += w) {
    const uint64_t value = at_index(i);
    uint64_t delta = 0;
    if (i > 0) {
      delta = value - previous;
      if (!Fits(delta, w)) {
        return false;  // not what was planned: never a delta cut short
      }
    } else if (chained && Fits(first - *last, w)) {
      delta = first - *last;  // a running sum over the page needs no correction here
    }
    StoreDelta(at, w, delta);
    previous = value;
  }
  if (n > 0) {
    *last = previous;
  }
  return true;
}

ColumnsEncoder::Part ColumnsEncoder::PartAt(size_t first_run) {
  Part part;
  part.encoder_ = this;
  part.run_ = first_run;
  return part;
}

bool ColumnsEncoder::Part::Write(const int64_t* steps, const double* values, const double* walls,
                                 size_t n) {
  ColumnsEncoder& e = *encoder_;
  if (e.body_.empty() || run_ >= e.planned_runs_ || e.planned_counts_[run_] != n ||
      e.written_[run_] != 0) {
    refused_ = true;
    return false;
  }
  const size_t point = e.offsets_[run_];
  if (!e.Put(e.steps_, steps, n, run_, point, &step_last_, chained_)) {
    refused_ = true;
    return false;
  }
  if (n > 0) {
    if (e.values_f4_) {
      char* at = e.body_.data() + e.values_at_ + point * 4;
      for (size_t i = 0; i < n; ++i, at += 4) {
        const auto f = static_cast<float>(values[i]);
        std::memcpy(at, &f, 4);
      }
    } else {
      std::memcpy(e.body_.data() + e.values_at_ + point * 8, values, n * 8);
    }
  }
  if (!e.Put(e.walls_, walls, n, run_, point, &wall_last_, chained_)) {
    refused_ = true;
    return false;
  }
  e.written_[run_] = 1;
  chained_ = chained_ || n > 0;
  ++run_;
  return true;
}

void ColumnsEncoder::Write(const int64_t* steps, const double* values, const double* walls,
                           size_t n) {
  sequential_.Write(steps, values, walls, n);
}

std::string ColumnsEncoder::Finish() {
  std::string out;
  const bool all = std::all_of(written_.begin(), written_.end(), [](uint8_t w) { return w != 0; });
  if (!sequential_.refused_ && all && written_.size() == planned_runs_ && !body_.empty()) {
    out.swap(body_);
  }
  *this = ColumnsEncoder();
  return out;
}

std::string EncodeColumns(nlohmann::ordered_json header, const PointColumns& columns) {
  const size_t n = columns.steps.size();
  std::vector<size_t> counts;
  if (header.contains("runs") && header["runs"].is_array()) {
    for (const auto& run : header["runs"]) {
      counts.push_back(run.value("count", size_t{0}));
    }
  } else {
    counts.push_back(n);
    header["runs"] = nlohmann::ordered_json::array({{{"run", 0}, {"count", n}}});
  }
  size_t total = 0;
  for (size_t c : counts) {
    total += c;
  }
  if (total != n || columns.values.size() != n || columns.walls.size() != n) {
    return {};
  }
  ColumnsEncoder encoder;
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) {
      encoder.Start(header);
    }
    size_t at = 0;
    for (size_t c : counts) {
      const int64_t* s = columns.steps.data() + at;
      const double* v = columns.values.data() + at;
      const double* w = columns.walls.data() + at;
      if (pass == 0) {
        encoder.Plan(s, v, w, c);
      } else {
        encoder.Write(s, v, w, c);
      }
      at += c;
    }
  }
  return encoder.Finish();
}

namespace {

uint32_t HeaderLength(std::string_view body) {
  uint32_t length = 0;
  for (int i = 0; i < 4; ++i) {
    length |= static_cast<uint32_t>(static_cast<unsigned char>(body[kColumnsMagic.size() + i]))
              << (8 * i);
  }
  return length;
}

absl::StatusOr<nlohmann::json> DecodeV1(std::string_view body, nlohmann::json header, size_t start,
                                        PointColumns* out) {
  const size_t n = header["points"].get<size_t>();
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

// One column of `n` 8-byte values (int64s, or doubles' bit patterns) of the runs `counts` from
// `section`, into `out`.
absl::Status DecodeInt(std::string_view section, const nlohmann::json& column,
                       const std::vector<size_t>& counts, size_t n, void* out) {
  const std::string coding = column.value("coding", "");
  if (coding == "plain") {
    if (section.size() != n * 8) {
      return absl::DataLossError("columns body: a plain section of the wrong size");
    }
    if (n > 0) {
      std::memcpy(out, section.data(), n * 8);
    }
    return absl::OkStatus();
  }
  const int w = column.value("width", 0);
  if (coding != "delta" || (w != 1 && w != 2 && w != 4)) {
    return absl::DataLossError(absl::StrCat("columns body: column '", column.value("name", ""),
                                            "' has an unknown coding"));
  }
  const size_t r = counts.size();
  if (section.size() != Pad8(r * 8 + n * static_cast<size_t>(w))) {
    return absl::DataLossError("columns body: a delta section of the wrong size");
  }
  const char* deltas = section.data() + r * 8;
  size_t at = 0;
  for (size_t run = 0; run < r; ++run) {
    uint64_t value = 0;
    std::memcpy(&value, section.data() + run * 8, 8);
    for (size_t i = 0; i < counts[run]; ++i, ++at) {
      if (i > 0) {
        value += LoadDelta(deltas + at * w, w);
      }
      std::memcpy(static_cast<char*>(out) + at * 8, &value, 8);
    }
  }
  return absl::OkStatus();
}

// A float64 column of `n` values from `section` ("f4" or "plain"), into `out`.
absl::Status DecodeValues(std::string_view section, const nlohmann::json& column, size_t n,
                          double* out) {
  const std::string coding = column.value("coding", "");
  if (coding == "f4" && section.size() == Pad8(n * 4)) {
    for (size_t i = 0; i < n; ++i) {
      float f = 0;
      std::memcpy(&f, section.data() + i * 4, 4);
      out[i] = f;
    }
  } else if (coding == "plain" && section.size() == n * 8) {
    if (n > 0) {
      std::memcpy(out, section.data(), n * 8);
    }
  } else {
    return absl::DataLossError("columns body: the values' section is not f4 or plain of N");
  }
  return absl::OkStatus();
}

// A body's magic, header and where its first section starts.
struct Framed {
  bool v1 = false;
  nlohmann::json header;
  size_t start = 0;
};

absl::StatusOr<Framed> Frame(std::string_view body) {
  const std::string_view magic = body.substr(0, kColumnsMagic.size());
  if (body.size() < kColumnsMagic.size() + 4 ||
      (magic != kColumnsMagic && magic != kColumnsMagicV1)) {
    return absl::DataLossError("not a TAE columns body (no TAECOL2 or TAECOL1 magic)");
  }
  const size_t length = HeaderLength(body);
  const size_t head = kColumnsMagic.size() + 4 + length;
  if (body.size() < head) {
    return absl::DataLossError("columns body: the header runs past the end");
  }
  Framed out;
  out.v1 = magic == kColumnsMagicV1;
  out.header = nlohmann::json::parse(body.substr(kColumnsMagic.size() + 4, length), nullptr, false);
  if (!out.header.is_object() || !out.header.contains("points") ||
      !out.header["points"].is_number_unsigned()) {
    return absl::DataLossError("columns body: the header is not an object with \"points\"");
  }
  out.start = Pad8(head);
  return out;
}

// A version-2 body's runs' counts (adding up to `n`) and its three sections, each its
// column's "bytes" long, filling the body to its end.
absl::Status Sections(std::string_view body, const Framed& framed, size_t n,
                      std::vector<size_t>* counts, std::vector<std::string_view>* sections) {
  const nlohmann::json& header = framed.header;
  size_t total = 0;
  if (header.contains("runs") && header["runs"].is_array()) {
    for (const auto& run : header["runs"]) {
      if (!run.is_object() || !run.contains("count") || !run["count"].is_number_unsigned()) {
        return absl::DataLossError("columns body: a run without a count");
      }
      counts->push_back(run["count"].get<size_t>());
      total += counts->back();
    }
  }
  const nlohmann::json columns = header.value("columns", nlohmann::json::array());
  if (total != n || n > body.size() || !columns.is_array() || columns.size() != 3) {
    return absl::DataLossError(
        "columns body: the runs' counts are not the points, or the "
        "columns are not step, value, wall_time");
  }
  size_t at = framed.start;
  for (const auto& column : columns) {
    const size_t bytes = column.is_object() ? column.value("bytes", size_t{0}) : 0;
    if (bytes > body.size() - std::min(at, body.size())) {
      return absl::DataLossError(
          absl::StrCat("columns body: ", body.size(), " bytes, shorter than its sections"));
    }
    sections->push_back(body.substr(at, bytes));
    at += bytes;
  }
  if (at != body.size()) {
    return absl::DataLossError(
        absl::StrCat("columns body: ", body.size(), " bytes, not the ", at, " its sections take"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<nlohmann::json> DecodeColumns(std::string_view body, PointColumns* out) {
  ASSIGN_OR_RETURN(Framed framed, Frame(body));
  if (framed.v1) {
    return DecodeV1(body, std::move(framed.header), framed.start, out);
  }
  const size_t n = framed.header["points"].get<size_t>();
  std::vector<size_t> counts;
  std::vector<std::string_view> sections;
  RETURN_IF_ERROR(Sections(body, framed, n, &counts, &sections));
  const nlohmann::json& columns = framed.header["columns"];
  out->steps.resize(n);
  out->values.resize(n);
  out->walls.resize(n);
  RETURN_IF_ERROR(DecodeInt(sections[0], columns[0], counts, n, out->steps.data()));
  RETURN_IF_ERROR(DecodeValues(sections[1], columns[1], n, out->values.data()));
  RETURN_IF_ERROR(DecodeInt(sections[2], columns[2], counts, n, out->walls.data()));
  return std::move(framed.header);
}

}  // namespace tae::api
