#pragma once

// The journal's on-disk record: internal to agent/journal.
//
// A segment file is a sequence of records, each
//
//   [u32 length][u32 crc32c][payload: `length` bytes]      (integers little-endian)
//
// where the CRC-32C covers the four length bytes and the payload, so a damaged length is caught
// as surely as a damaged payload. A payload is one record group, applied all or nothing:
//
//   u8 format (1)  u8 flags (bit 0: checkpoint)  varint first_seq
//   varint n_events  n × (varint size, serialized tae.v1.Event)   seqs first_seq, first_seq+1, ...
//   varint n_marks   n × (fixed64 run_id, fixed32 attempt, fixed32 stream, fixed64 offset)
//   varint n_forgets n × (fixed64 run_id, fixed32 attempt)
//
// first_seq is the seq of the first event, or for a group without events the seq the next event
// will get, so replay can check that seqs run on without a gap. A checkpoint group's marks are
// the complete set of live marks at that point of the journal (older segments can then go).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/journal/journal.h"

namespace tae::agent::journal_internal {

inline constexpr size_t kHeaderBytes = 8;
// Larger lengths are not believed on replay (a damaged length, not a record).
inline constexpr uint32_t kMaxPayloadBytes = 256u << 20;
inline constexpr uint8_t kFlagCheckpoint = 1;

struct RunKey {
  int64_t run_id = 0;
  int32_t attempt = 0;
};

struct Group {
  uint8_t flags = 0;
  uint64_t first_seq = 0;
  std::vector<std::string_view> events;  // serialized Events, views into the payload
  std::vector<SourceMark> marks;
  std::vector<RunKey> forgets;
};

uint32_t Crc32c(const char* data, size_t size, uint32_t crc = 0);

// Appends one framed record holding the group to `out`. `events` are serialized Events.
void AppendRecord(uint8_t flags, uint64_t first_seq, const std::vector<std::string>& events,
                  const std::vector<SourceMark>& marks, const std::vector<RunKey>& forgets,
                  std::string* out);

// The payload of an intact record starting at `offset` of `data`, or false when the bytes there
// are not one (too short, implausible length, CRC mismatch).
bool ReadFrame(std::string_view data, size_t offset, std::string_view* payload);

// Decodes a payload that passed its CRC; false when it does not follow the format.
bool DecodeGroup(std::string_view payload, Group* group);

}  // namespace tae::agent::journal_internal
