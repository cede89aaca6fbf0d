#include "server/rpc/convert.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "common/metrics/metric_line.h"
#include "common/snapshot/snapshot.h"
#include "common/text/utf8.h"
#include "proto/tae/v1/artifact.h"

namespace tae::rpc {
namespace {

constexpr size_t kMaxManifestBytes = 16 << 20;  // ~150k files

// Text as stored: what is not UTF-8 becomes U+FFFD. Protobuf's parser refuses such strings on
// the wire; this holds for any other way a message is made.
std::string Utf8(const std::string& text) {
  return text::IsValidUtf8(text) ? text : text::ToValidUtf8(text);
}

}  // namespace

grpc::Status ToGrpc(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

controller::AgentHello FromProto(const tae::v1::Register& in) {
  controller::AgentHello hello;
  hello.agent.id = in.agent_id();
  hello.agent.host = in.host();
  hello.agent.slots = in.slots();
  hello.agent.labels = model::Labels(in.labels().begin(), in.labels().end());
  hello.agent.version = in.version();
  hello.agent.facts = in.facts();
  for (const tae::v1::HeldRun& run : in.held_runs()) {
    hello.held.emplace_back(run.run_id(), run.attempt());
  }
  return hello;
}

bool IsGoodWallTime(double wall_time, double received_at) {
  return std::isfinite(wall_time) && wall_time >= 0 && wall_time <= received_at + kMaxClockAheadS;
}

absl::Status CheckEvent(const tae::v1::Event& e) {
  if (e.seq() == 0) {
    return absl::InvalidArgumentError("seq: must be > 0");
  }
  if (e.run_id() <= 0 || e.attempt() <= 0) {
    return absl::InvalidArgumentError("run_id, attempt: must be > 0");
  }
  switch (e.kind_case()) {
    case tae::v1::Event::kMetrics:
      if (e.metrics().values_size() > static_cast<int>(metrics::kMaxValuesPerLine)) {
        return absl::InvalidArgumentError(
            absl::StrCat("metrics.values: ", e.metrics().values_size(), " values; at most ",
                         metrics::kMaxValuesPerLine));
      }
      for (const tae::v1::Scalar& s : e.metrics().values()) {
        if (!metrics::IsValidMetricKey(s.key())) {
          return absl::InvalidArgumentError(absl::StrCat(
              "metrics.values.key: '", s.key().substr(0, 80), "' is not a metric key"));
        }
      }
      return absl::OkStatus();
    case tae::v1::Event::kLog:
      if (e.log().text().size() > kMaxLogText) {
        return absl::InvalidArgumentError(
            absl::StrCat("log.text: ", e.log().text().size(), " bytes; at most ", kMaxLogText));
      }
      if (e.log().stream() != "stdout" && e.log().stream() != "stderr" &&
          e.log().stream() != "agent") {
        return absl::InvalidArgumentError("log.stream: must be stdout, stderr or agent");
      }
      return absl::OkStatus();
    case tae::v1::Event::kExited:
      if (e.exited().reason().size() > kMaxLogText) {
        return absl::InvalidArgumentError("exited.reason: too long");
      }
      return absl::OkStatus();
    case tae::v1::Event::kMeta:
      if (e.meta().values_size() > static_cast<int>(metrics::kMaxMetaEntriesPerLine)) {
        return absl::InvalidArgumentError("meta.values: too many entries");
      }
      for (const auto& [key, value] : e.meta().values()) {
        if (!metrics::IsValidMetricKey(key) || value.size() > metrics::kMaxMetaValueLength) {
          return absl::InvalidArgumentError(
              absl::StrCat("meta.values: bad key or value for '", key.substr(0, 80), "'"));
        }
      }
      return absl::OkStatus();
    case tae::v1::Event::kStarted:
    case tae::v1::Event::KIND_NOT_SET:
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

uint64_t FromProto(const tae::v1::EventBatch& in, double received_at,
                   std::vector<model::IngestEvent>* out, std::vector<std::string>* rejected) {
  auto reject = [&](const tae::v1::Event& e, const std::string& why) {
    if (rejected != nullptr) {
      rejected->push_back(absl::StrCat("event seq ", e.seq(), " of r", e.run_id(), ": ", why));
    }
  };
  uint64_t last_seq = 0;
  for (const tae::v1::Event& e : in.events()) {
    last_seq = std::max(last_seq, e.seq());
    if (absl::Status valid = CheckEvent(e); !valid.ok()) {
      reject(e, std::string(valid.message()));
      if (e.seq() > 0 && e.run_id() > 0 && e.attempt() > 0) {
        // Said on the run, not only in taed.log: a warning line at the event's own seq, so a
        // resend of the batch stores it once (taectl logs, and taectl show's warnings).
        model::IngestEvent said;
        said.kind = model::IngestEvent::Kind::kLog;
        said.seq = e.seq();
        said.run_id = e.run_id();
        said.attempt = e.attempt();
        said.wall_time = received_at;
        said.stream = "agent";
        said.text = Utf8(
            absl::StrCat("warning: taed did not store event ", e.seq(), ": ", valid.message()));
        out->push_back(std::move(said));
      }
      continue;
    }
    model::IngestEvent event;
    event.seq = e.seq();
    event.run_id = e.run_id();
    event.attempt = e.attempt();
    event.wall_time = e.wall_time();
    if (!IsGoodWallTime(e.wall_time(), received_at)) {
      // The event is kept, at the time it arrived; only the bad value is dropped.
      reject(e, absl::StrCat("wall_time: ", e.wall_time(), " is not a time; taken as received"));
      event.wall_time = received_at;
    }
    switch (e.kind_case()) {
      case tae::v1::Event::kMetrics:
        event.kind = model::IngestEvent::Kind::kMetrics;
        event.step = e.metrics().step();
        for (const tae::v1::Scalar& s : e.metrics().values()) {
          // NaN and +-inf pass: a diverged metric is data (the store records where it diverged;
          // a search counts it as the worst value), not a value to drop.
          event.values.push_back({s.key(), s.value()});
        }
        break;
      case tae::v1::Event::kLog:
        event.kind = model::IngestEvent::Kind::kLog;
        event.stream = e.log().stream();
        event.text = Utf8(e.log().text());
        break;
      case tae::v1::Event::kStarted:
        event.kind = model::IngestEvent::Kind::kStarted;
        event.pid = e.started().pid();
        break;
      case tae::v1::Event::kExited:
        event.kind = model::IngestEvent::Kind::kExited;
        event.exit_code = e.exited().exit_code();
        event.signal = e.exited().signal();
        event.cancelled = e.exited().cancelled();
        event.interrupted = e.exited().interrupted();
        event.infra = e.exited().infra();
        event.not_started = e.exited().not_started();
        event.by_other_job = e.exited().by_other_job();
        event.text = Utf8(e.exited().reason());
        break;
      case tae::v1::Event::kMeta:
        event.kind = model::IngestEvent::Kind::kMeta;
        event.meta = model::RunMeta(e.meta().values().begin(), e.meta().values().end());
        break;
      case tae::v1::Event::KIND_NOT_SET:
        continue;
    }
    out->push_back(std::move(event));
  }
  return last_seq;
}

absl::StatusOr<controller::CheckpointOffer> ParseCheckpointOffer(
    int64_t run_id, int attempt, int64_t step, const std::string& manifest,
    const std::string& artifact, std::map<std::string, uint64_t>* sizes) {
  if (run_id <= 0) {
    return absl::InvalidArgumentError("run_id: must be > 0");
  }
  if (attempt <= 0) {
    return absl::InvalidArgumentError("attempt: must be > 0");
  }
  if (step < 0) {
    return absl::InvalidArgumentError("step: must be >= 0");
  }
  if (!artifact.empty() && !v1::IsArtifactName(artifact)) {
    return absl::InvalidArgumentError(
        absl::StrCat("artifact: '", artifact.substr(0, 80), "' is not an artifact name"));
  }
  if (manifest.empty()) {
    return absl::InvalidArgumentError(
        artifact.empty() ? "manifest: empty (the checkpoint directory has no files)"
                         : "manifest: empty (the job wrote no files for the artifact)");
  }
  if (manifest.size() > kMaxManifestBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("manifest: larger than ", kMaxManifestBytes, " bytes"));
  }
  absl::StatusOr<std::vector<snapshot::Entry>> entries = snapshot::ParseManifest(manifest);
  if (!entries.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("manifest: ", entries.status().message()));
  }
  controller::CheckpointOffer offer;
  offer.run_id = run_id;
  offer.attempt = attempt;
  offer.step = step;
  offer.manifest = manifest;
  offer.artifact = artifact;
  offer.manifest_id = snapshot::SnapshotId(*entries);
  offer.files = static_cast<int64_t>(entries->size());
  std::unordered_set<std::string> seen;
  std::unordered_map<std::string, uint64_t> size_of;
  for (const snapshot::Entry& entry : *entries) {
    // Summed without wrapping: an entry of 2^64 - X bytes must not pass the caps as a small one.
    if (entry.size > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() - offer.bytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("manifest: \"", entry.path.substr(0, 200), "\" (", entry.size,
                       " bytes) makes the checkpoint larger than 2^63 bytes"));
    }
    offer.bytes += static_cast<int64_t>(entry.size);
    if (auto [it, fresh] = size_of.try_emplace(entry.sha256, entry.size);
        !fresh && it->second != entry.size) {
      return absl::InvalidArgumentError(
          absl::StrCat("manifest: content ", entry.sha256.substr(0, 16), " is named with sizes ",
                       it->second, " and ", entry.size));
    }
    if (seen.insert(entry.sha256).second) {
      offer.hashes.push_back(entry.sha256);
    }
    if (sizes != nullptr) {
      (*sizes)[entry.sha256] = entry.size;
    }
  }
  return offer;
}

}  // namespace tae::rpc
