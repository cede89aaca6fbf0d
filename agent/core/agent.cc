#include "agent/core/agent.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/link/enrol.h"
#include "boost/asio/post.hpp"
#include "common/clock/clock.h"
#include "common/text/bytes.h"
#include "common/text/utf8.h"
#include "common/version/version.h"
#include "nlohmann/json.hpp"
#include "proto/tae/v1/limits.h"
#include "spdlog/spdlog.h"

namespace tae::agent {
namespace {

constexpr size_t kMaxEventsPerBatch = tae::v1::kAgentEventsPerBatch;

std::string HostName() {
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

}  // namespace

Agent::Agent(boost::asio::io_context* io, AgentOptions options)
    : io_(io),
      options_(std::move(options)),
      journal_(std::make_unique<Journal>()),
      runner_(
          io,
          RunnerOptions{options_.work_dir, options_.train_binary, options_.threads_per_run, 5000,
                        options_.python_dir, options_.job_binary, 50, options_.sys_interval_s},
          [this](tae::v1::Event event, std::optional<OutputMark> mark) {
            OnEvent(std::move(event), mark);
          }),
      heartbeat_timer_(*io),
      retry_timer_(*io) {}

absl::Status Agent::Start(const std::function<bool()>& stopping) {
  std::error_code ec;
  std::filesystem::create_directories(options_.work_dir + "/runs", ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create ", options_.work_dir, "/runs: ", ec.message()));
  }
  // Every call from here on presents this agent's own credential (agent/link/enrol.h).
  absl::StatusOr<std::string> credential =
      ObtainCredential(options_.taed, options_.tls, options_.token, options_.id, options_.work_dir,
                       /*wait_s=*/300, stopping);
  if (!credential.ok()) {
    return credential.status();
  }
  options_.token = *std::move(credential);
  if (options_.durable_journal) {
    absl::StatusOr<std::unique_ptr<Journal>> journal =
        Journal::Open(options_.work_dir + "/journal");
    if (!journal.ok()) {
      return journal.status();
    }
    journal_ = std::move(*journal);
  }
  // What this machine has (process::RunTool runs its vendor tools beside the runner's reaper).
  host::GatherOptions gather;
  gather.dirs = {{"work", options_.work_dir}, {"cache", options_.work_dir + "/cache"}};
  gather.threads_per_run = options_.threads_per_run;
  facts_ = host::Gather(gather);
  checkpoints_ = std::make_unique<CheckpointSync>(options_.taed, options_.token, options_.tls);
  runner_.set_checkpoint_handler(
      [this](const tae::v1::StartRun& start, metrics::CheckpointMark mark) {
        return OnCheckpointMarked(start, mark);
      });
  runner_.set_profile_handler([this](const tae::v1::StartRun& start, metrics::ProfileMark mark) {
    OnProfileMarked(start, std::move(mark));
  });
  AdoptOrphans();
  absl::StatusOr<std::unique_ptr<Stager>> stager =
      Stager::Start(options_.taed, options_.token, options_.work_dir + "/cache",
                    options_.work_dir + "/runs", options_.tls);
  if (!stager.ok()) {
    return stager.status();
  }
  stager_ = std::move(*stager);
  LinkCallbacks callbacks;
  callbacks.on_connected = [this] { boost::asio::post(*io_, [this] { OnConnected(); }); };
  callbacks.on_message = [this](tae::v1::TaedMessage message) {
    boost::asio::post(*io_, [this, message = std::move(message)] { OnMessage(message); });
  };
  callbacks.on_disconnected = [this](const std::string& why) {
    boost::asio::post(*io_, [this, why] { OnDisconnected(why); });
  };
  link_ = std::make_unique<Link>(options_.taed, options_.token, std::move(callbacks), options_.tls);
  link_->Start();
  Heartbeat();
  return absl::OkStatus();
}

void Agent::OnConnected() {
  tae::v1::AgentMessage message;
  tae::v1::Register* reg = message.mutable_register_();
  reg->set_agent_id(options_.id);
  reg->set_host(HostName());
  reg->set_slots(options_.slots);
  reg->set_version(version::Project());  // the project version CMake gives
  *reg->mutable_facts() = facts_;
  for (const auto& [key, value] : options_.labels) {
    (*reg->mutable_labels())[key] = value;
  }
  for (const auto& [run_id, attempt] : runner_.Held()) {
    tae::v1::HeldRun* held = reg->add_held_runs();
    held->set_run_id(run_id);
    held->set_attempt(attempt);
  }
  std::set<std::pair<int64_t, int>> held_runs;
  for (const auto& [key, staging] : staging_) {
    held_runs.insert(key);
  }
  for (const auto& [seq, key] : exits_) {
    held_runs.insert(key);  // ended, but taed has not acked the exit yet
  }
  for (const auto& [run_id, attempt] : runner_.Held()) {
    held_runs.erase({run_id, attempt});
  }
  for (const auto& [run_id, attempt] : held_runs) {
    tae::v1::HeldRun* held = reg->add_held_runs();
    held->set_run_id(run_id);
    held->set_attempt(attempt);
  }
  if (!link_->Send(std::move(message))) {
    return;  // the stream already broke; the link dials again
  }
  connected_ = true;
  journal_->ResetSent();
  spdlog::info("connected to taed at {} ({} unacked events to resend)", options_.taed,
               journal_->unacked());
  Flush();
}

void Agent::OnDisconnected(const std::string& why) {
  if (connected_) {
    spdlog::warn("lost taed: {}; reconnecting", why);
  } else {
    spdlog::debug("cannot reach taed: {}", why);
  }
  connected_ = false;
}

void Agent::OnMessage(const tae::v1::TaedMessage& message) {
  switch (message.kind_case()) {
    case tae::v1::TaedMessage::kStartRun:
      StartRun(message.start_run());
      return;
    case tae::v1::TaedMessage::kCancelRun: {
      const tae::v1::CancelRun& cancel = message.cancel_run();
      auto staging = staging_.find({cancel.run_id(), cancel.attempt()});
      if (staging != staging_.end()) {
        staging->second.cancelled = true;  // reported once staging ends
        staging->second.reason = cancel.reason().empty() ? "cancelled" : cancel.reason();
        return;
      }
      runner_.Cancel(cancel.run_id(), cancel.attempt(), cancel.reason());
      return;
    }
    case tae::v1::TaedMessage::kScrap: {
      std::set<std::string> active;
      for (const auto& [run_id, attempt] : runner_.Held()) {
        active.insert(runner_.RunDir(run_id, attempt));
      }
      for (const auto& [key, staging] : staging_) {
        active.insert(runner_.RunDir(key.first, key.second));
      }
      stager_->Scrap({message.scrap().snapshot_ids().begin(), message.scrap().snapshot_ids().end()},
                     message.scrap().all(), std::move(active));
      return;
    }
    case tae::v1::TaedMessage::kProfileRun:
      RequestProfile(message.profile_run());
      return;
    case tae::v1::TaedMessage::kAck:
      journal_->Ack(message.ack().seq());
      while (!exits_.empty() && exits_.begin()->first <= message.ack().seq()) {
        const auto [run_id, attempt] = exits_.begin()->second;
        runner_.MarkDone(run_id, attempt);
        journal_->ForgetRun(run_id, attempt);
        exits_.erase(exits_.begin());
      }
      CheckShutdown();
      return;
    case tae::v1::TaedMessage::kRegistered:
      if (message.registered().heartbeat_s() > 0 &&
          message.registered().heartbeat_s() != options_.heartbeat_s) {
        options_.heartbeat_s = std::max(0.05, message.registered().heartbeat_s());
        Heartbeat();  // re-arms the timer at the new interval (the old wait is aborted)
      }
      return;
    case tae::v1::TaedMessage::KIND_NOT_SET:
      return;
  }
}

void Agent::StartRun(const tae::v1::StartRun& start) {
  const std::pair<int64_t, int> key{start.run_id(), start.attempt()};
  if (shutdown_done_ || fatal_) {
    // Placed while this agent was going away: not the run's fault, so taed requeues it.
    RunFailedToStart(start, "agent shutting down", true);
    return;
  }
  if (staging_.count(key) > 0) {
    return;  // a repeated StartRun for a run being staged
  }
  if (start.snapshot_id().empty() && !start.has_checkpoint()) {
    absl::Status status = runner_.Start(start);
    if (!status.ok() && !absl::IsAlreadyExists(status)) {
      RunFailedToStart(start, std::string(status.message()), false);
    }
    return;
  }
  staging_[key] = Staging{};
  if (start.snapshot_id().empty()) {
    RestoreCheckpoint(start);
    return;
  }
  stager_->Stage(start.snapshot_id(), runner_.RunDir(start.run_id(), start.attempt()),
                 [this, start](StageResult result) {
                   boost::asio::post(*io_, [this, start, result = std::move(result)]() mutable {
                     OnStaged(start, std::move(result));
                   });
                 });
}

bool Agent::EndStaging(const tae::v1::StartRun& start) {
  auto it = staging_.find({start.run_id(), start.attempt()});
  if (it == staging_.end()) {
    return false;
  }
  Staging staging = it->second;
  staging_.erase(it);
  if (staging.cancelled || staging.interrupted) {
    tae::v1::Event exited;
    exited.set_run_id(start.run_id());
    exited.set_attempt(start.attempt());
    exited.mutable_exited()->set_exit_code(-1);
    exited.mutable_exited()->set_cancelled(staging.cancelled && !staging.interrupted);
    exited.mutable_exited()->set_interrupted(staging.interrupted);
    exited.mutable_exited()->set_reason(staging.reason);
    OnEvent(std::move(exited));
    CheckShutdown();
    return false;
  }
  return true;
}

void Agent::OnStaged(const tae::v1::StartRun& start, StageResult result) {
  auto it = staging_.find({start.run_id(), start.attempt()});
  if (it == staging_.end()) {
    return;
  }
  const bool cancelled = it->second.cancelled || it->second.interrupted;
  if (!result.status.ok() || cancelled || !start.has_checkpoint()) {
    if (!EndStaging(start)) {
      return;
    }
  }
  if (!result.status.ok()) {
    // taed unreachable mid-fetch is not the run's fault: it is requeued.
    RunFailedToStart(start,
                     absl::StrCat("cannot stage snapshot ", start.snapshot_id().substr(0, 12), ": ",
                                  result.status.message()),
                     absl::IsUnavailable(result.status) || absl::IsDeadlineExceeded(result.status));
    return;
  }
  LogAgentLine(start, absl::StrCat("snapshot ", start.snapshot_id().substr(0, 12), ": ",
                                   result.files, " files, ", result.bytes, " bytes; fetched ",
                                   result.blobs_fetched, " blobs (", result.bytes_fetched,
                                   " bytes) in ", absl::StrFormat("%.3f", result.seconds), " s"));
  if (start.has_checkpoint()) {
    RestoreCheckpoint(start);  // still staging
    return;
  }
  absl::Status status = runner_.Start(start);
  if (!status.ok() && !absl::IsAlreadyExists(status)) {
    RunFailedToStart(start, std::string(status.message()), false);
  }
}

void Agent::RestoreCheckpoint(const tae::v1::StartRun& start) {
  checkpoints_->Restore(start.checkpoint().manifest(), runner_.CheckpointDir(start.run_id()),
                        [this, start](RestoreResult result) {
                          boost::asio::post(*io_, [this, start, result = std::move(result)] {
                            OnRestored(start, result);
                          });
                        });
}

void Agent::OnRestored(const tae::v1::StartRun& start, RestoreResult result) {
  if (!EndStaging(start)) {
    return;
  }
  const int64_t step = start.checkpoint().step();
  if (!result.status.ok()) {
    RunFailedToStart(
        start,
        absl::StrCat("cannot restore its checkpoint at step ", step, ": ", result.status.message()),
        absl::IsUnavailable(result.status) || absl::IsDeadlineExceeded(result.status));
    return;
  }
  const snapshot::FillStats& stats = result.stats;
  LogAgentLine(start, absl::StrCat("checkpoint at step ", step,
                                   " restored into TAE_CHECKPOINT_DIR: ", stats.files, " files, ",
                                   stats.bytes, " bytes; fetched ", stats.blobs_written, " (",
                                   stats.bytes_written, " bytes), kept ", stats.files_kept, ", in ",
                                   absl::StrFormat("%.3f", result.seconds), " s"));
  absl::Status status = runner_.Start(start);
  if (!status.ok() && !absl::IsAlreadyExists(status)) {
    RunFailedToStart(start, std::string(status.message()), false);
  }
}

bool Agent::OnCheckpointMarked(const tae::v1::StartRun& start, metrics::CheckpointMark mark) {
  nlohmann::json config = nlohmann::json::parse(start.config_json(), nullptr, false);
  const auto keep = config.is_object() ? config.find("resources.keep_checkpoints") : config.end();
  if (keep != config.end() && keep->is_number_integer() && keep->get<int64_t>() <= 0) {
    return true;  // resources.keep_checkpoints = 0: they stay on the worker
  }
  const std::string dir = runner_.CheckpointDir(start.run_id());
  absl::StatusOr<Capture> capture = CaptureCheckpoint(
      dir,
      absl::StrCat(options_.work_dir, "/runs/r", start.run_id(), "/.captures/step-", mark.step),
      mark.time, mark.watched);
  if (!capture.ok()) {
    LogAgentLine(start, absl::StrCat(mark.watched ? "files in TAE_CHECKPOINT_DIR at step "
                                                  : "checkpoint at step ",
                                     mark.step, mark.watched ? " not captured yet: " : " skipped: ",
                                     capture.status().message()));
    return false;
  }
  if (mark.watched) {
    LogAgentLine(start, absl::StrCat("files in TAE_CHECKPOINT_DIR settled: captured as the "
                                     "checkpoint at step ",
                                     mark.step, " (job.checkpoints = \"watch\")"));
  }
  capture->run_id = start.run_id();
  capture->attempt = start.attempt();
  capture->step = mark.step;
  checkpoints_->Upload(*std::move(capture), [this, start, step = mark.step](UploadResult result) {
    boost::asio::post(*io_, [this, start, step, result = std::move(result)] {
      if (result.superseded) {
        return;
      }
      if (!result.status.ok()) {
        LogAgentLine(start, absl::StrCat("checkpoint at step ", step,
                                         " not uploaded: ", result.status.message()));
        return;
      }
      LogAgentLine(start, absl::StrCat("checkpoint at step ", step, " uploaded: ", result.files,
                                       " files, ", result.bytes, " bytes; sent ",
                                       result.blobs_uploaded, " new (", result.bytes_uploaded,
                                       " bytes) in ", absl::StrFormat("%.3f", result.seconds), " s",
                                       result.dropped > 0
                                           ? absl::StrCat("; ", result.dropped, " older dropped")
                                           : std::string()));
    });
  });
  return true;
}

void Agent::RequestProfile(const tae::v1::ProfileRun& request) {
  absl::Status asked = runner_.RequestProfile(request.run_id(), request.attempt(), request.id(),
                                              request.steps(), request.seconds());
  if (!asked.ok()) {
    ProfileFailed(request.run_id(), request.attempt(), request.id(), std::string(asked.message()));
  }
}

void Agent::ProfileFailed(int64_t run_id, int attempt, const std::string& id,
                          const std::string& error) {
  tae::v1::AgentMessage message;
  tae::v1::ProfileFailed* failed = message.mutable_profile_failed();
  failed->set_run_id(run_id);
  failed->set_attempt(attempt);
  failed->set_id(id);
  failed->set_error(error);
  link_->Send(std::move(message));  // lost with the stream: taectl then reports a timeout
}

void Agent::OnProfileMarked(const tae::v1::StartRun& start, metrics::ProfileMark mark) {
  const std::string request = runner_.ProfileRequestPath(start.run_id(), start.attempt());
  std::error_code ec;
  // The job answered: its request is done (a self-initiated capture leaves another one pending).
  if (std::ifstream in(request); in) {
    nlohmann::json pending = nlohmann::json::parse(in, nullptr, false);
    if (pending.is_object() && pending.value("id", std::string()) == mark.id) {
      std::filesystem::remove(request, ec);
    }
  }
  const std::string dir = runner_.ProfileDir(start.run_id(), start.attempt());
  if (!mark.error.empty()) {
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      std::filesystem::remove_all(entry.path(), ec);  // the next capture starts empty
    }
    LogAgentLine(start, absl::StrCat("profile ", mark.id, " failed: ", mark.error));
    ProfileFailed(start.run_id(), start.attempt(), mark.id, mark.error);
    return;
  }
  absl::StatusOr<Capture> capture = CaptureCheckpoint(
      dir,
      absl::StrCat(options_.work_dir, "/runs/r", start.run_id(), "/.captures/profile-", mark.id),
      mark.time + 1.0);  // the job's clock; a profile is not rewritten after its mark
  // The directory is emptied for the next profile whether or not the capture worked.
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::filesystem::remove_all(entry.path(), ec);
  }
  if (capture.ok() && capture->files == 0) {
    capture = absl::FailedPreconditionError("the job wrote nothing into TAE_PROFILE_DIR");
  }
  if (!capture.ok()) {
    const std::string why = absl::StrCat("not captured: ", capture.status().message());
    LogAgentLine(start, absl::StrCat("profile ", mark.id, " ", why));
    ProfileFailed(start.run_id(), start.attempt(), mark.id, why);
    return;
  }
  capture->run_id = start.run_id();
  capture->attempt = start.attempt();
  capture->step = mark.step.value_or(0);
  capture->artifact = absl::StrCat("profile-", mark.id);
  checkpoints_->Upload(*std::move(capture), [this, start, mark](UploadResult result) {
    boost::asio::post(*io_, [this, start, mark, result = std::move(result)] {
      if (!result.status.ok()) {
        const std::string why = absl::StrCat("not uploaded: ", result.status.message());
        LogAgentLine(start, absl::StrCat("profile ", mark.id, " ", why));
        ProfileFailed(start.run_id(), start.attempt(), mark.id, why);
        return;
      }
      LogAgentLine(start,
                   absl::StrCat("profile ", mark.id, " (", mark.tool, ", ", mark.steps, " steps",
                                mark.step ? absl::StrCat(" from step ", *mark.step) : std::string(),
                                ") uploaded as profile-", mark.id, ": ", result.files, " files, ",
                                result.bytes, " bytes"));
    });
  });
}

void Agent::RunFailedToStart(const tae::v1::StartRun& start, const std::string& why,
                             bool interrupted, bool infra) {
  spdlog::error("run r{}: {}", start.run_id(), why);
  // A start that failed on a disk another job here filled is that job's doing: requeued, but
  // neither a start fault that would repeat (the space comes back when that job ends) nor the
  // worker's fault.
  std::optional<RunDisk> filler;
  if (infra && !interrupted) {
    const DiskSpace disk = DiskSpaceOf(options_.work_dir);
    if (DiskFull(disk)) {
      filler = DiskFiller(runner_.DiskUse(), disk);
    }
  }
  tae::v1::Event exited;
  exited.set_run_id(start.run_id());
  exited.set_attempt(start.attempt());
  exited.mutable_exited()->set_exit_code(-1);
  exited.mutable_exited()->set_reason(
      absl::StrCat("agent could not start it: ", why,
                   filler ? absl::StrCat("; the worker's disk was filled by run r", filler->run_id,
                                         " (it wrote ", text::FormatBytes(filler->bytes), ")")
                          : std::string()));
  exited.mutable_exited()->set_interrupted(interrupted);
  exited.mutable_exited()->set_infra(infra && !interrupted);
  // Its program never ran: a start fault, unless another job caused it.
  exited.mutable_exited()->set_not_started(infra && !interrupted && !filler);
  exited.mutable_exited()->set_by_other_job(filler.has_value());
  OnEvent(std::move(exited));
}

void Agent::Fatal(const std::string& why) {
  if (fatal_) {
    return;
  }
  fatal_ = true;
  spdlog::critical("agent cannot go on: {}; stopping its runs and exiting", why);
  if (connected_) {
    tae::v1::AgentMessage fault;
    fault.mutable_fault()->set_reason(why);
    link_->Send(std::move(fault));
  }
  runner_.InterruptAll(absl::StrCat("agent failed: ", why));
  for (auto& [key, staging] : staging_) {
    staging.interrupted = true;
    staging.reason = "agent failed";
  }
  // The fault message goes out on the link's writer thread; give it a moment, and the runs
  // their SIGTERM, then end the process.
  retry_timer_.expires_after(std::chrono::seconds(2));
  retry_timer_.async_wait([this](const boost::system::error_code&) {
    if (on_fatal_) {
      on_fatal_();
    }
  });
}

void Agent::LogAgentLine(const tae::v1::StartRun& start, std::string text) {
  tae::v1::Event event;
  event.set_run_id(start.run_id());
  event.set_attempt(start.attempt());
  event.set_wall_time(clock::WallNow());
  event.mutable_log()->set_stream("agent");
  event.mutable_log()->set_text(std::move(text));
  OnEvent(std::move(event));
}

void Agent::OnEvent(tae::v1::Event event, std::optional<OutputMark> mark) {
  if (event.has_exited()) {
    BlameWorker(&event);
  }
  // A job's bytes need not be UTF-8, protobuf strings must be (a journaled event with invalid
  // UTF-8 would not parse back): keep every line, with U+FFFD for what is not UTF-8.
  if (event.has_log() && !text::IsValidUtf8(event.log().text())) {
    event.mutable_log()->set_text(text::ToValidUtf8(event.log().text()));
  }
  if (event.has_exited() && !text::IsValidUtf8(event.exited().reason())) {
    event.mutable_exited()->set_reason(text::ToValidUtf8(event.exited().reason()));
  }
  if (mark.has_value()) {
    pending_marks_.push_back(
        SourceMark{event.run_id(), event.attempt(), mark->stream, mark->offset});
  }
  pending_events_.push_back(std::move(event));
  ScheduleFlush();
}

bool Agent::JournalPending() {
  if (!pending_events_.empty() || !pending_marks_.empty()) {
    const size_t n = pending_events_.size();
    std::vector<std::pair<int64_t, int>> exited;
    for (const tae::v1::Event& event : pending_events_) {
      exited.emplace_back(event.has_exited() ? event.run_id() : -1, event.attempt());
    }
    const uint64_t last = journal_->Append(std::move(pending_events_), std::move(pending_marks_));
    pending_events_.clear();
    pending_marks_.clear();
    for (size_t i = 0; i < n; ++i) {
      if (exited[i].first >= 0) {
        exits_[last - n + 1 + i] = exited[i];
      }
    }
  }
  absl::Status synced = journal_->Sync();
  if (synced.ok()) {
    journal_failing_since_.reset();
  }
  if (!synced.ok()) {
    // Disk full or failing: nothing is sent before it is durable; try again shortly, and give
    // up (the agent stops, taed requeues its runs elsewhere) if it does not heal.
    const auto now = std::chrono::steady_clock::now();
    if (RelieveDisk()) {
      journal_failing_since_ = now;  // a job filled the disk; its space is coming back
    } else if (!journal_failing_since_.has_value()) {
      journal_failing_since_ = now;
    } else if (now - *journal_failing_since_ >
               std::chrono::milliseconds(static_cast<int64_t>(kJournalFailingS * 1000))) {
      Fatal(absl::StrCat("its journal cannot be written: ", synced.message()));
      return false;
    }
    spdlog::error("journal: {}; retrying", synced.ToString());
    retry_timer_.expires_after(std::chrono::seconds(1));
    retry_timer_.async_wait([this](const boost::system::error_code& error) {
      if (!error) {
        Flush();
      }
    });
    return false;
  }
  return true;
}

void Agent::AdoptOrphans() {
  std::map<std::pair<int64_t, int>, std::array<uint64_t, 3>> offsets;
  std::map<std::pair<int64_t, int>, std::map<int, uint64_t>> event_files;
  for (const SourceMark& mark : journal_->Marks()) {
    if (mark.stream >= 0 && mark.stream < 3) {
      offsets[{mark.run_id, mark.attempt}][mark.stream] = mark.offset;
    } else if (mark.stream >= kFirstEventFileStream) {
      event_files[{mark.run_id, mark.attempt}][mark.stream] = mark.offset;
    }
  }
  for (const OrphanJob& orphan : runner_.Orphans()) {
    const std::pair<int64_t, int> key{orphan.start.run_id(), orphan.start.attempt()};
    std::array<uint64_t, 3> from = {0, 0, 0};
    if (auto it = offsets.find(key); it != offsets.end()) {
      from = it->second;
    }
    absl::Status adopted = runner_.Adopt(orphan.start, from, event_files[key]);
    if (!adopted.ok()) {
      spdlog::error("run r{}: cannot adopt: {}", key.first, adopted.ToString());
    }
  }
}

void Agent::ScheduleFlush() {
  if (flush_scheduled_) {
    return;
  }
  flush_scheduled_ = true;
  // Posting coalesces every event produced by the same burst of pipe reads into one batch.
  boost::asio::post(*io_, [this] {
    flush_scheduled_ = false;
    Flush();
  });
}

void Agent::Flush() {
  if (!JournalPending()) {
    return;
  }
  while (connected_ && journal_->has_unsent()) {
    // At most kMaxEventsPerBatch events, in messages of at most kAgentBatchBytes each: a batch
    // over taed's message size would be refused, and sent again, forever.
    tae::v1::AgentMessage message;
    size_t bytes = 0;
    for (tae::v1::Event& event : journal_->TakeUnsent(kMaxEventsPerBatch)) {
      const size_t size = event.ByteSizeLong();
      if (message.events().events_size() > 0 && bytes + size > tae::v1::kAgentBatchBytes) {
        if (!link_->Send(std::move(message))) {
          connected_ = false;  // resent after the next Register
          return;
        }
        message = tae::v1::AgentMessage();
        bytes = 0;
      }
      *message.mutable_events()->add_events() = std::move(event);
      bytes += size;
    }
    if (!link_->Send(std::move(message))) {
      connected_ = false;  // resent after the next Register
      return;
    }
  }
  CheckShutdown();
}

void Agent::Heartbeat() {
  if (journal_ != nullptr && !fatal_ && !RelieveDisk()) {
    if (absl::Status healthy = journal_->Healthy(); !healthy.ok()) {
      // On a disk full of what no job wrote (RelieveDisk found no filler), the disk is the cause.
      const DiskSpace disk = DiskSpaceOf(options_.work_dir);
      Fatal(absl::StrCat(DiskFull(disk)
                             ? absl::StrCat("the worker's disk is full (", disk.free_bytes >> 10,
                                            " KiB free in ", options_.work_dir, "); ")
                             : "",
                         "its journal cannot keep events: ", healthy.message()));
      return;
    }
  }
  if (connected_) {
    tae::v1::AgentMessage message;
    message.mutable_heartbeat();
    link_->Send(std::move(message));
  }
  heartbeat_timer_.expires_after(
      std::chrono::milliseconds(static_cast<int64_t>(options_.heartbeat_s * 1000)));
  heartbeat_timer_.async_wait([this](const boost::system::error_code& error) {
    if (!error) {
      Heartbeat();
    }
  });
}

void Agent::Shutdown(std::function<void()> done, int grace_ms) {
  shutdown_done_ = std::move(done);
  if (connected_) {
    tae::v1::AgentMessage draining;
    draining.mutable_draining();
    link_->Send(std::move(draining));  // ahead of the runs' exits on the same stream
  }
  runner_.InterruptAll("agent shut down");
  for (auto& [key, staging] : staging_) {
    staging.interrupted = true;
    staging.reason = "agent shut down";
  }
  auto timer =
      std::make_shared<boost::asio::steady_timer>(*io_, std::chrono::milliseconds(grace_ms));
  timer->async_wait([this, timer](const boost::system::error_code&) {
    if (shutdown_done_) {
      spdlog::warn("shutdown grace over with {} unacked events", journal_->unacked());
      auto done = std::move(shutdown_done_);
      shutdown_done_ = nullptr;
      done();
    }
  });
  CheckShutdown();
}

void Agent::Abandon() { JournalPending(); }

void Agent::CheckShutdown() {
  if (shutdown_done_ && runner_.idle() && staging_.empty() && pending_events_.empty() &&
      journal_->unacked() == 0) {
    auto done = std::move(shutdown_done_);
    shutdown_done_ = nullptr;
    done();
  }
}

}  // namespace tae::agent
