#pragma once

// TensorBoard event files: the writer and a whole-file reader for `taectl export EXP --tensorboard
// DIR`, and the incremental reader the agent follows a job's event files with (job.tensorboard).
//
// An event file is a sequence of TFRecord-framed records, each a serialized Event proto
// (proto/tensorboard/event.proto, TensorBoard's field numbers). The first record is an Event with
// file_version "brain.Event:2"; then one Event per scalar point, holding a Summary with one
// simple_value. Layout, framing and CRC are described in docs/tensorboard.md.
//
// Framing of one record (integers little endian):
//   uint64 length | uint32 MaskedCrc32c(length bytes) | data[length] | uint32 MaskedCrc32c(data)

#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tae::tensorboard {

// The file_version of the first record of every file.
inline constexpr std::string_view kFileVersion = "brain.Event:2";

// One scalar point: TensorBoard shows `value` on the chart `tag` at x = `step`. TensorBoard's
// simple_value is a float32, so `value` reads back as static_cast<float>(value).
struct Scalar {
  std::string tag;
  int64_t step = 0;
  double wall_time = 0;  // Unix seconds.
  double value = 0;
};

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of `data`.
uint32_t Crc32c(std::string_view data);
// The CRC that TFRecord stores: ((crc >> 15) | (crc << 17)) + 0xa282ead8 of Crc32c(data).
uint32_t MaskedCrc32c(std::string_view data);

// "events.out.tfevents.<whole seconds of file_wall_time>.<hostname>".
std::string EventFileName(double file_wall_time);

// Streams scalars into one new event file (buffered; nothing but the current record is held in
// memory). Usage: Create, Append for each point, Close. A writer destroyed without Close leaves a
// file that may lack its last records.
class EventFileWriter {
 public:
  // Creates `dir` if missing and opens dir/EventFileName(file_wall_time) (replacing a file of that
  // name), then writes the file_version record with wall_time = file_wall_time.
  static absl::StatusOr<std::unique_ptr<EventFileWriter>> Create(const std::string& dir,
                                                                 double file_wall_time);

  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  // Appends one Event holding `scalar`.
  absl::Status Append(const Scalar& scalar);
  // Flushes and closes the file; an error if any write failed.
  absl::Status Close();

  const std::string& path() const { return path_; }

 private:
  explicit EventFileWriter(std::string path);
  absl::Status WriteRecord(std::string_view data);

  std::string path_;
  std::unique_ptr<char[]> buffer_;
  std::ofstream out_;
  std::string record_;  // Reused serialization buffer.
};

// Writes one event file in `dir` (created if missing) holding `scalars` in the given order;
// returns its path.
absl::StatusOr<std::string> WriteEventFile(const std::string& dir,
                                           const std::vector<Scalar>& scalars,
                                           double file_wall_time);

// Reads an event file, verifying both CRCs of every record, and returns its scalars in file order
// (one per simple_value; the file_version event and other kinds of values are skipped). A bad
// CRC, a truncated record or a record that is not an Event is a DataLoss error naming the byte
// offset of the record; a missing file is NotFound.
absl::StatusOr<std::vector<Scalar>> ReadEventFile(const std::string& path);

// What ReadEventRecords found in a piece of an event file.
struct EventRecords {
  std::vector<Scalar> scalars;  // in file order
  // Bytes of `data` read through: whole records, and bytes skipped as corrupt. The next read
  // starts here; what is left is a record still being written (or too little to tell).
  uint64_t consumed = 0;
  // One line per corrupt record or run of bytes skipped, naming its file offset.
  std::vector<std::string> warnings;
};

// The largest record a job's event file may hold (a header claiming more is corrupt).
inline constexpr uint64_t kMaxRecordBytes = 64 << 20;

// Reads the whole records at the start of `data`, which holds the bytes of an event file from
// byte `offset` on, and returns the scalars in them:
//  - simple_value (PyTorch's SummaryWriter, TF1);
//  - a rank-0 float, double, half, bfloat16, int32 or int64 tensor (TF2's tf.summary.scalar,
//    CLU) of a tag whose plugin is "scalars" or not named. TF2 names the plugin only with a tag's
//    first value in a file: `plugins` (tag -> plugin) carries what earlier records named from
//    one read of a file to the next.
// Other events and values (file_version, graphs, histograms, text, ...) give nothing.
// Records are checked as TFRecord defines them: a header whose length fails its masked CRC-32C
// (or claims more than kMaxRecordBytes) is skipped byte by byte up to the next header that
// checks; a record whose data fails its CRC, or is not an Event, is skipped whole. Each skip is a
// warning. A last record not yet whole stops the read: reading again from `consumed` with more
// bytes gives what one read of everything would.
EventRecords ReadEventRecords(std::string_view data, uint64_t offset,
                              std::map<std::string, std::string>* plugins);

}  // namespace tae::tensorboard
