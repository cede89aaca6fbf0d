// libFuzzer target for the TensorBoard event-file reader the agent follows a job's files with
// (common/tensorboard: ReadEventRecords).
//
// Input: arbitrary bytes, as an event file. Checks:
//  - a read consumes no more than it was given, and every warning names a byte offset;
//  - reading the file in three pieces, each read starting where the last one's consumed bytes
//    ended (as the agent does while a job writes), gives the same scalars as one read of the
//    whole file, in the same order, and consumes as much;
//  - every scalar has a tag the reader found in the data (not made up), and a step.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/tensorboard/tensorboard.h"

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_tfevents: property violated: %s\n", what);
    std::abort();
  }
}

bool Same(const tae::tensorboard::Scalar& a, const tae::tensorboard::Scalar& b) {
  const bool values = a.value == b.value || (a.value != a.value && b.value != b.value);  // NaN
  return a.tag == b.tag && a.step == b.step && a.wall_time == b.wall_time && values;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view file(reinterpret_cast<const char*>(data), size);
  std::map<std::string, std::string> plugins;
  const tae::tensorboard::EventRecords whole =
      tae::tensorboard::ReadEventRecords(file, 0, &plugins);
  Check(whole.consumed <= size, "consumed more than given");
  for (const std::string& warning : whole.warnings) {
    Check(warning.rfind("byte offset ", 0) == 0, "a warning without its offset");
  }
  for (const tae::tensorboard::Scalar& scalar : whole.scalars) {
    Check(file.find(scalar.tag) != std::string_view::npos, "a tag not in the data");
  }
  // The same file as a writer would have flushed it: up to a third, two thirds, then all.
  std::map<std::string, std::string> resumed_plugins;
  std::vector<tae::tensorboard::Scalar> pieces;
  uint64_t at = 0;
  for (size_t end : {size / 3, 2 * size / 3, size}) {
    if (end < at) {
      continue;
    }
    const tae::tensorboard::EventRecords part =
        tae::tensorboard::ReadEventRecords(file.substr(at, end - at), at, &resumed_plugins);
    Check(part.consumed <= end - at, "a piece consumed more than given");
    pieces.insert(pieces.end(), part.scalars.begin(), part.scalars.end());
    at += part.consumed;
  }
  Check(at == whole.consumed, "pieces consumed other than the whole");
  Check(pieces.size() == whole.scalars.size(), "pieces gave another number of scalars");
  for (size_t i = 0; i < pieces.size(); ++i) {
    Check(Same(pieces[i], whole.scalars[i]), "pieces gave other scalars");
  }
  return 0;
}
