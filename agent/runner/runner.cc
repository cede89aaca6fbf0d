#include "agent/runner/runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/runner/resume.h"
#include "agent/runner/runner_job.h"
#include "agent/sysstat/sysstat.h"
#include "boost/asio/post.hpp"
#include "common/auth/environment.h"
#include "common/clock/clock.h"
#include "common/fs/fs.h"
#include "common/process/spawn.h"
#include "common/status/macros.h"
#include "nlohmann/json.hpp"
#include "proto/tae/v1/limits.h"
#include "spdlog/spdlog.h"

namespace tae::agent {
namespace {

constexpr size_t kMaxLogLine = tae::v1::kAgentMaxLogLine;
constexpr int kStdout = 0;
constexpr int kStderr = 1;
constexpr int kMetrics = 2;
constexpr const char* kStreamFiles[3] = {"stdout", "stderr", "metrics"};

// Vendor tools get this long per sample; they run on the AcceleratorProbe's thread.
constexpr int kSysToolTimeoutMs = 3000;

double MonotonicNow() {
  using namespace std::chrono;
  return duration_cast<duration<double>>(steady_clock::now().time_since_epoch()).count();
}

using clock::WallNow;

// A flat config ({"model.layers": 2, "params.model.dim": 64}) as nested objects
// ({"model": {"layers": 2}, "params": {"model": {"dim": 64}}}); "{}" for text that is not a JSON
// object. A key that is both a value and a prefix keeps the value under its full dotted name.
std::string NestedConfig(const std::string& flat_json) {
  const nlohmann::json flat = nlohmann::json::parse(flat_json, nullptr, false);
  nlohmann::json nested = nlohmann::json::object();
  if (!flat.is_object()) {
    return nested.dump();
  }
  for (const auto& [key, value] : flat.items()) {
    nlohmann::json* node = &nested;
    size_t begin = 0;
    bool placed = true;
    for (size_t dot = key.find('.'); dot != std::string::npos; dot = key.find('.', begin)) {
      nlohmann::json& child = (*node)[key.substr(begin, dot - begin)];
      if (!child.is_null() && !child.is_object()) {
        placed = false;
        break;
      }
      node = &child;
      begin = dot + 1;
    }
    if (placed && !node->contains(key.substr(begin))) {
      (*node)[key.substr(begin)] = value;
    } else {
      nested[key] = value;
    }
  }
  return nested.dump();
}

int64_t ParseIntOr(std::string_view text, int64_t fallback) {
  int64_t value = 0;
  return absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size())),
                          &value)
             ? value
             : fallback;
}

// The variables a multi-host job finds its place in the gang by (none for one host): TAE's own,
// torch.distributed's (env:// init), jax.distributed's, and libtpu's (torch_xla PJRT and JAX on a
// TPU slice). Ranks are hosts: one process per host, local rank 0.
std::vector<std::pair<std::string, std::string>> GangEnv(const tae::v1::StartRun& start) {
  if (start.world_size() <= 1) {
    return {};
  }
  const std::string rank = absl::StrCat(start.rank());
  const std::string world = absl::StrCat(start.world_size());
  const std::string port = absl::StrCat(start.master_port());
  return {
      {"TAE_RANK", rank},
      {"TAE_WORLD_SIZE", world},
      {"MASTER_ADDR", start.master_addr()},
      {"MASTER_PORT", port},
      {"RANK", rank},
      {"WORLD_SIZE", world},
      {"LOCAL_RANK", "0"},
      {"LOCAL_WORLD_SIZE", "1"},
      {"GROUP_RANK", rank},
      {"JAX_COORDINATOR_ADDRESS", absl::StrCat(start.master_addr(), ":", start.master_port() + 1)},
      {"JAX_NUM_PROCESSES", world},
      {"JAX_PROCESS_ID", rank},
      {"TPU_WORKER_ID", rank},
      {"TPU_WORKER_HOSTNAMES", absl::StrJoin(start.host_addrs(), ",")},
  };
}

// What a supervisor that ended early said last (JOB_DIR/supervisor.log gets its stderr, and
// Spawn's own when it could not be executed): the last line, at most 500 bytes of it.
std::string SupervisorLastWords(const std::string& job_dir) {
  const std::string path = job_dir + "/supervisor.log";
  const absl::StatusOr<std::string> text = fs::ReadFile(path);
  const absl::string_view trimmed =
      text.ok() ? absl::StripTrailingAsciiWhitespace(*text) : absl::string_view();
  if (trimmed.empty()) {
    return absl::StrCat("it left no message in ", path);
  }
  const size_t newline = trimmed.rfind('\n');
  const absl::string_view last =
      newline == absl::string_view::npos ? trimmed : trimmed.substr(newline + 1);
  return std::string(last.substr(0, 500));
}

}  // namespace

tae::v1::Event MetricsEvent(int64_t step,
                            const std::vector<std::pair<std::string, double>>& values) {
  tae::v1::Event event;
  tae::v1::MetricLine* metrics = event.mutable_metrics();
  metrics->set_step(step);
  for (const auto& [key, value] : values) {
    tae::v1::Scalar* scalar = metrics->add_values();
    scalar->set_key(key);
    scalar->set_value(value);
  }
  return event;
}

// How long a job's group must outlive its dead supervisor to count as having killed it.
constexpr int kOrphanGraceMs = 1000;

Runner::Runner(boost::asio::io_context* io, RunnerOptions options, EventSink sink)
    : io_(io),
      options_(std::move(options)),
      sink_(std::move(sink)),
      sigchld_(*io, SIGCHLD),
      poll_timer_(*io),
      sys_timer_(*io),
      disk_timer_(*io) {
  // Supervisors are our children; orphans re-parented to us are reaped too.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  WatchChildren();
  if (options_.sys_interval_s > 0) {
    // Its tools are clone children that the waitpid(-1) above never reaps (process::RunTool).
    accelerators_ =
        std::make_unique<sysstat::AcceleratorProbe>(options_.sys_interval_s, kSysToolTimeoutMs);
  }
}

// Jobs are not killed here: they belong to their supervisors and outlive this process (a
// graceful shutdown stops them first with InterruptAll).
Runner::~Runner() = default;

std::string Runner::RunDir(int64_t run_id, int attempt) const {
  return absl::StrCat(options_.work_dir, "/runs/r", run_id, "-a", attempt);
}

std::string Runner::CheckpointDir(int64_t run_id) const {
  return absl::StrCat(options_.work_dir, "/runs/r", run_id, "/checkpoint");
}

std::string Runner::JobDir(int64_t run_id, int attempt) const {
  return RunDir(run_id, attempt) + ".job";
}

std::string Runner::ProfileDir(int64_t run_id, int attempt) const {
  return JobDir(run_id, attempt) + "/profile";
}

std::string Runner::ProfileRequestPath(int64_t run_id, int attempt) const {
  return JobDir(run_id, attempt) + "/profile-request.json";
}

absl::Status Runner::RequestProfile(int64_t run_id, int attempt, const std::string& id, int steps,
                                    double seconds) {
  auto it = jobs_.find({run_id, attempt});
  if (it == jobs_.end()) {
    return absl::NotFoundError(
        absl::StrCat("r", run_id, " attempt ", attempt, " is not running on this agent"));
  }
  const Job& job = *it->second;
  if (job.cancel_requested || job.finishing) {
    return absl::FailedPreconditionError(
        absl::StrCat("r", run_id, " attempt ", attempt, " is being stopped"));
  }
  if (job.spec.world_size() > 1 && job.spec.rank() != 0) {
    return absl::FailedPreconditionError("only rank 0 takes profile requests");
  }
  nlohmann::json request = {{"id", id}, {"steps", steps}, {"seconds", seconds}};
  return fs::WriteFileAtomically(ProfileRequestPath(run_id, attempt), request.dump() + "\n",
                                 {0644, fs::Durability::kNone});
}

absl::Status Runner::OpenOutputs(Job& job, std::array<uint64_t, 3> offsets) {
  for (int i = 0; i < 3; ++i) {
    const std::string path = absl::StrCat(job.job_dir, "/", kStreamFiles[i]);
    int fd = open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
      return absl::InternalError(absl::StrCat("cannot open ", path, ": ", strerror(errno)));
    }
    struct stat st {};
    fstat(fd, &st);
    if (static_cast<uint64_t>(st.st_size) < offsets[i]) {
      close(fd);
      return absl::DataLossError(absl::StrCat(path, " is shorter (", st.st_size,
                                              " bytes) than the journal's offset ", offsets[i]));
    }
    lseek(fd, static_cast<off_t>(offsets[i]), SEEK_SET);
    job.fds[i] = fd;
    job.offsets[i] = offsets[i];
  }
  return absl::OkStatus();
}

absl::Status Runner::Start(const tae::v1::StartRun& start) {
  if (jobs_.count({start.run_id(), start.attempt()}) > 0) {
    return absl::AlreadyExistsError(
        absl::StrCat("run r", start.run_id(), " attempt ", start.attempt(), " is already running"));
  }
  auto job = std::make_shared<Job>(io_);
  job->spec = start;
  job->command = !start.command().empty();
  job->run_dir = RunDir(start.run_id(), start.attempt());
  job->job_dir = JobDir(start.run_id(), start.attempt());
  std::error_code ec;
  std::filesystem::create_directories(job->run_dir, ec);
  std::filesystem::remove_all(job->job_dir, ec);
  std::filesystem::create_directories(job->job_dir, ec);
  std::filesystem::create_directories(ProfileDir(start.run_id(), start.attempt()), ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot create ", job->job_dir, ": ", ec.message()));
  }
  // Adopting the job after an agent restart reads start.pb: it must survive a crash whole.
  RETURN_IF_ERROR(fs::WriteFileAtomically(job->job_dir + "/start.pb", start.SerializeAsString(),
                                          {0644, fs::Durability::kFileAndDir}));
  // The run's resolved config for the program (TAE_CONFIG), nested: "params.model.dim" is
  // {"params": {"model": {"dim": ...}}}, as scripts load their configs.
  const std::string config_path = job->job_dir + "/config.json";
  RETURN_IF_ERROR(fs::WriteFileAtomically(config_path, NestedConfig(start.config_json()) + "\n",
                                          {0644, fs::Durability::kNone}));
  std::vector<std::string> program;
  if (job->command) {
    // {resume:TEXT} is this attempt's to say: TEXT where it starts from a restored checkpoint.
    program = {"/bin/sh", "-c", ResolveResume(start.command(), start.has_checkpoint())};
  } else {
    // A worker without the engine cannot run any tae-train run: the worker's fault, before the
    // job ran (a start fault), not the run's.
    if (access(options_.train_binary.c_str(), X_OK) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("the engine binary ", options_.train_binary,
                       " is missing or not executable on this worker (", strerror(errno), ")"));
    }
    // Written beside and renamed over: a run.json in the snapshot is a hard link into the cache,
    // which writing through it would corrupt.
    RETURN_IF_ERROR(fs::WriteFileAtomically(job->run_dir + "/run.json", start.config_json() + "\n",
                                            {0644, fs::Durability::kNone}));
    program = {options_.train_binary, "--spec", "run.json"};
  }
  RETURN_IF_ERROR(OpenOutputs(*job, {0, 0, 0}));
  SetUpSources(*job, {});

  process::SpawnRequest request;
  request.argv = {options_.job_binary, job->job_dir, job->run_dir};
  request.argv.insert(request.argv.end(), program.begin(), program.end());
  request.log_path = job->job_dir + "/supervisor.log";
  // The job never sees the agent's credentials, nor a TAE_HOME that leads to taed (an agent
  // started by hand where taed runs may have one).
  request.env_remove = auth::TaedOnlyEnv();
  request.cwd = job->run_dir;
  request.env = {
      {"TAE_RUN_ID", absl::StrCat(start.run_id())},
      {"TAE_ATTEMPT", absl::StrCat(start.attempt())},
      {"TAE_EXPERIMENT", absl::StrCat(start.experiment_id())},
      {"TAE_VARIANT", start.variant()},
      {"TAE_SEED", absl::StrCat(start.seed())},
      {"TAE_RUN_DIR", job->run_dir},
      {"TAE_CONFIG", config_path},
      {"TAE_METRICS_FD", absl::StrCat(process::kMetricsFd)},
      // Shared by the run's attempts on this agent; before a new attempt starts, the agent makes
      // it the run's last checkpoint taed stores (docs/checkpoints.md).
      {"TAE_CHECKPOINT_DIR", CheckpointDir(start.run_id())},
      // Profiles on demand (docs/profiles.md).
      {"TAE_PROFILE_DIR", ProfileDir(start.run_id(), start.attempt())},
      {"TAE_PROFILE_REQUEST", ProfileRequestPath(start.run_id(), start.attempt())},
      {"TAE_THREADS", absl::StrCat(options_.threads_per_run)},
      {"OMP_NUM_THREADS", absl::StrCat(options_.threads_per_run)},
      {"OPENBLAS_NUM_THREADS", absl::StrCat(options_.threads_per_run)},
      // Spinning OpenMP workers starve each other on shared cores (steps several times slower).
      {"OMP_WAIT_POLICY", "PASSIVE"},
  };
  if (start.has_checkpoint()) {
    request.env.emplace_back("TAE_RESUME_STEP", absl::StrCat(start.checkpoint().step()));
  }
  for (auto& [name, value] : GangEnv(start)) {
    request.env.emplace_back(std::move(name), std::move(value));
  }
  if (job->command && !options_.python_dir.empty()) {
    const char* existing = std::getenv("PYTHONPATH");
    // job.wandb = "capture": the stand-in wandb (python_dir/tae_wandb) comes before any other.
    const nlohmann::json config = nlohmann::json::parse(start.config_json(), nullptr, false);
    const bool capture = config.is_object() && config.value("job.wandb", "") == "capture";
    std::string path = capture
                           ? absl::StrCat(options_.python_dir, "/tae_wandb:", options_.python_dir)
                           : options_.python_dir;
    if (existing != nullptr && *existing != '\0') {
      absl::StrAppend(&path, ":", existing);
    }
    request.env.emplace_back("PYTHONPATH", std::move(path));
  }
  absl::StatusOr<process::SpawnedProcess> spawned = process::Spawn(request);
  if (!spawned.ok()) {
    return spawned.status();
  }
  job->supervisor = spawned->pid;
  (void)fs::WriteFileAtomically(job->job_dir + "/supervisor.pid",
                                absl::StrCat(job->supervisor, "\n"), {0644, fs::Durability::kNone});
  job->free_at_start = DiskSpaceOf(options_.work_dir).free_bytes;
  (void)fs::WriteFileAtomically(job->job_dir + "/free_at_start",
                                absl::StrCat(job->free_at_start, "\n"),
                                {0644, fs::Durability::kNone});
  jobs_[{start.run_id(), start.attempt()}] = job;
  spdlog::info("run r{} attempt {} started: supervisor pid {} in {}", start.run_id(),
               start.attempt(), job->supervisor, job->run_dir);
  SchedulePoll();
  ScheduleSysSample();
  ScheduleDiskCheck();
  return absl::OkStatus();
}

absl::Status Runner::Adopt(const tae::v1::StartRun& start, std::array<uint64_t, 3> offsets,
                           const std::map<int, uint64_t>& event_file_offsets) {
  if (jobs_.count({start.run_id(), start.attempt()}) > 0) {
    return absl::AlreadyExistsError(absl::StrCat("run r", start.run_id(), " is already held"));
  }
  auto job = std::make_shared<Job>(io_);
  job->spec = start;
  job->command = !start.command().empty();
  job->run_dir = RunDir(start.run_id(), start.attempt());
  job->job_dir = JobDir(start.run_id(), start.attempt());
  job->adopted = true;
  job->started_emitted = true;  // the agent that started it reported that
  if (absl::StatusOr<std::string> pid = fs::ReadFile(job->job_dir + "/supervisor.pid"); pid.ok()) {
    job->supervisor = static_cast<pid_t>(ParseIntOr(*pid, 0));
  }
  if (absl::StatusOr<std::string> pgid = fs::ReadFile(job->job_dir + "/pgid"); pgid.ok()) {
    job->pgid = static_cast<pid_t>(ParseIntOr(*pgid, 0));
  }
  if (absl::StatusOr<std::string> reason = fs::ReadFile(job->job_dir + "/cancel"); reason.ok()) {
    job->cancel_requested = true;
    job->signalled = true;
    job->cancel_reason = *reason;
  }
  if (absl::StatusOr<std::string> reason = fs::ReadFile(job->job_dir + "/fail"); reason.ok()) {
    job->fail_reason = *reason;
  }
  if (absl::StatusOr<std::string> free = fs::ReadFile(job->job_dir + "/free_at_start"); free.ok()) {
    job->free_at_start = static_cast<uint64_t>(ParseIntOr(*free, 0));
  }
  RETURN_IF_ERROR(OpenOutputs(*job, offsets));
  SetUpSources(*job, event_file_offsets);
  jobs_[{start.run_id(), start.attempt()}] = job;
  spdlog::info(
      "run r{} attempt {} adopted (supervisor pid {}, job group {}), reading from {}/{}/{}",
      start.run_id(), start.attempt(), job->supervisor, job->pgid, offsets[0], offsets[1],
      offsets[2]);
  SchedulePoll();
  ScheduleSysSample();
  ScheduleDiskCheck();
  return absl::OkStatus();
}

std::vector<OrphanJob> Runner::Orphans() const {
  std::vector<OrphanJob> out;
  std::error_code ec;
  const std::string runs = options_.work_dir + "/runs";
  for (const auto& entry : std::filesystem::directory_iterator(runs, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.size() < 5 || name.substr(name.size() - 4) != ".job") {
      continue;
    }
    const std::string dir = entry.path().string();
    if (std::filesystem::exists(dir + "/done")) {
      continue;
    }
    absl::StatusOr<std::string> bytes = fs::ReadFile(dir + "/start.pb");
    OrphanJob orphan;
    if (!bytes.ok() || !orphan.start.ParseFromString(*bytes) ||
        JobDir(orphan.start.run_id(), orphan.start.attempt()) != dir) {
      spdlog::warn("ignoring {}: no readable start.pb", dir);
      continue;
    }
    orphan.finished = std::filesystem::exists(dir + "/exit");
    out.push_back(std::move(orphan));
  }
  return out;
}

void Runner::MarkDone(int64_t run_id, int attempt) {
  const std::string dir = JobDir(run_id, attempt);
  std::ofstream(dir + "/done");
  if (reclaim_.erase({run_id, attempt}) > 0) {
    for (const std::string& path : DiskDirs(run_id, attempt)) {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
      spdlog::info("run r{}: {} removed to give its disk space back{}", run_id, path,
                   ec ? absl::StrCat(" (", ec.message(), ")") : "");
    }
  }
  // The output is in taed now; keep start.pb and exit for the record.
  for (const char* name : kStreamFiles) {
    std::error_code ec;
    std::filesystem::remove(absl::StrCat(dir, "/", name), ec);
  }
  PruneEndedAttempts();
}

void Runner::Emit(const Job& job, tae::v1::Event event, std::optional<OutputMark> mark) {
  event.set_run_id(job.spec.run_id());
  event.set_attempt(job.spec.attempt());
  event.set_wall_time(WallNow());
  sink_(std::move(event), mark);
}

void Runner::SchedulePoll() {
  if (polling_ || jobs_.empty()) {
    return;
  }
  polling_ = true;
  poll_timer_.expires_after(std::chrono::milliseconds(options_.poll_ms));
  poll_timer_.async_wait([this](const boost::system::error_code& error) {
    polling_ = false;
    if (!error) {
      Poll();
    }
  });
}

void Runner::Poll() {
  std::vector<std::shared_ptr<Job>> done;
  for (auto& [key, job] : jobs_) {
    if (job->pgid == 0) {
      if (absl::StatusOr<std::string> pgid = fs::ReadFile(job->job_dir + "/pgid"); pgid.ok()) {
        job->pgid = static_cast<pid_t>(ParseIntOr(*pgid, 0));
      }
    }
    if (job->pgid > 0 && !job->started_emitted) {
      EmitStarted(*job);
    }
    if (job->cancel_requested && !job->signalled && job->pgid > 0) {
      job->signalled = true;
      kill(-job->pgid, SIGTERM);
      job->kill_timer.expires_after(std::chrono::milliseconds(options_.kill_grace_ms));
      // A copy of its own: lambdas cannot capture a structured binding in C++17 (clang).
      job->kill_timer.async_wait([held = job](const boost::system::error_code& error) {
        if (!error && !held->finishing && held->pgid > 0) {
          kill(-held->pgid, SIGKILL);
        }
      });
    }
    if (Pump(*job)) {
      done.push_back(job);
    }
  }
  for (const std::shared_ptr<Job>& job : done) {
    Finish(job);
  }
  SchedulePoll();
}

bool Runner::Pump(Job& job) {
  for (int i = 0; i < 3; ++i) {
    ReadStream(job, i, false);
  }
  DeliverCheckpointMark(job);
  WatchCheckpoints(job, false);
  PollEventFiles(job, false);
  const bool exited = std::filesystem::exists(job.job_dir + "/exit");
  bool supervisor_gone = job.supervisor_reaped;
  if (!exited && !supervisor_gone && job.adopted && job.supervisor > 0) {
    supervisor_gone = kill(job.supervisor, 0) != 0 && errno == ESRCH;
  }
  if (!exited && !supervisor_gone) {
    return false;
  }
  // Over: every writer is gone (or the supervisor died), so the files are final.
  for (int i = 0; i < 3; ++i) {
    ReadStream(job, i, true);
  }
  DeliverCheckpointMark(job);
  WatchCheckpoints(job, true);
  PollEventFiles(job, true);
  return true;
}

std::string CheckpointDirSignature(const std::string& dir) {
  std::vector<std::string> entries;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      continue;
    }
    entries.push_back(absl::StrCat(it->path().lexically_relative(dir).generic_string(), "\t",
                                   st.st_size, "\t", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec,
                                   "\n"));
  }
  std::sort(entries.begin(), entries.end());
  return absl::StrJoin(entries, "");
}

void Runner::WatchCheckpoints(Job& job, bool final) {
  if (!job.watch_checkpoints || !checkpoint_handler_ ||
      (job.spec.world_size() > 1 && job.spec.rank() != 0)) {
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (!final && now < job.watch_due) {
    return;
  }
  job.watch_due = now + std::chrono::seconds(1);
  const std::string seen = CheckpointDirSignature(CheckpointDir(job.spec.run_id()));
  if (seen != job.watch_seen) {
    job.watch_seen = seen;
    job.watch_since = now;
  }
  const bool settled =
      final || now - job.watch_since >= std::chrono::duration<double>(kWatchQuietS);
  if (seen.empty() || seen == job.watch_captured || !settled) {
    return;
  }
  metrics::CheckpointMark mark;
  mark.step = job.last_step;
  mark.time =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  mark.watched = true;
  if (checkpoint_handler_(job.spec, mark)) {
    job.watch_captured = seen;
  }
}

void Runner::DeliverCheckpointMark(Job& job) {
  // Only the newest mark of what was read: the older ones' files are replaced already.
  if (job.checkpoint_mark.has_value() && checkpoint_handler_) {
    checkpoint_handler_(job.spec, *job.checkpoint_mark);
  }
  job.checkpoint_mark.reset();
}

void Runner::ReadStream(Job& job, int index, bool final) {
  std::array<char, 65536> buffer;
  std::string& partial = job.partial[index];
  while (true) {
    ssize_t n = read(job.fds[index], buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    partial.append(buffer.data(), static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1) {
      OnLine(job, index, partial.substr(start, nl - start), job.offsets[index] + nl + 1);
    }
    job.offsets[index] += start;
    partial.erase(0, start);
    if (partial.size() > kMaxLogLine) {
      job.offsets[index] += partial.size();
      OnLine(job, index, std::move(partial), job.offsets[index]);
      partial.clear();
    }
  }
  if (final && !partial.empty()) {
    job.offsets[index] += partial.size();
    OnLine(job, index, std::move(partial), job.offsets[index]);
    partial.clear();
  }
}

void Runner::OnLine(Job& job, int index, std::string line, uint64_t end) {
  const OutputMark mark{index, end};
  // In a gang, rank 0 reports the run's metrics; the other ranks' output is only logged. (A
  // skipped line needs no mark: reading it again after a restart skips it again.)
  const bool reports_metrics = job.spec.world_size() <= 1 || job.spec.rank() == 0;
  if (line.size() > kMaxLogLine) {
    line.resize(kMaxLogLine);
  }
  if (index == kStderr && line.find_first_not_of(" \t\r") != std::string::npos) {
    job.last_stderr = line.substr(0, 300);
  }
  if (index != kMetrics) {
    std::optional<metrics::MetricRecord> record;
    if (index == kStdout && job.command && reports_metrics) {
      record = metrics::ParseKeyValueLine(line);
    }
    if (job.command && reports_metrics) {
      if (std::optional<metrics::MetricRecord> matched = MatchPatterns(job, index, line)) {
        if (!record.has_value()) {
          record = std::move(matched);
        } else {  // both: the line's key=value pairs, then the patterns' values
          record->step = record->step.has_value() ? record->step : matched->step;
          record->values.insert(record->values.end(), matched->values.begin(),
                                matched->values.end());
        }
      }
    }
    const bool metrics = record.has_value() && !record->values.empty();
    tae::v1::Event event;
    event.mutable_log()->set_stream(index == kStdout ? "stdout" : "stderr");
    event.mutable_log()->set_text(std::move(line));
    Emit(job, std::move(event), metrics ? std::nullopt : std::optional<OutputMark>(mark));
    if (metrics) {
      EmitMetrics(job, std::move(*record), mark);  // the line's last event carries its mark
    }
    return;
  }
  if (line.find_first_not_of(" \t\r") == std::string::npos || !reports_metrics) {
    return;
  }
  absl::StatusOr<metrics::MetricRecord> record = metrics::ParseJsonLine(line);
  if (!record.ok()) {
    tae::v1::Event event;
    event.mutable_log()->set_stream("agent");
    event.mutable_log()->set_text(absl::StrCat(
        "bad metric line ignored: ", record.status().message(), ": ", line.substr(0, 200)));
    Emit(job, std::move(event), mark);
    return;
  }
  if (record->checkpoint.has_value()) {
    job.checkpoint_mark = record->checkpoint;  // delivered once this read is done
  }
  if (record->profile.has_value() && profile_handler_ &&
      (job.spec.world_size() <= 1 || job.spec.rank() == 0)) {
    profile_handler_(job.spec, *std::move(record->profile));
  }
  const bool has_values = !record->values.empty();
  if (!record->meta.empty()) {
    tae::v1::Event meta;
    auto* values = meta.mutable_meta()->mutable_values();
    for (auto& [key, value] : record->meta) {
      (*values)[key] = std::move(value);  // a repeated key: the last one wins
    }
    Emit(job, std::move(meta), has_values ? std::nullopt : std::optional<OutputMark>(mark));
  }
  if (has_values) {
    EmitMetrics(job, std::move(*record), mark);
  }
}

void Runner::EmitMetrics(Job& job, metrics::MetricRecord record, std::optional<OutputMark> mark) {
  job.last_step = record.step.value_or(job.last_step);
  Emit(job, MetricsEvent(job.last_step, record.values), mark);
}

void Runner::EmitStarted(Job& job) {
  job.started_emitted = true;
  tae::v1::Event event;
  event.mutable_started()->set_pid(job.pgid);
  event.mutable_started()->set_run_dir(job.run_dir);
  Emit(job, std::move(event), std::nullopt);
}

void Runner::ScheduleSysSample() {
  if (sampling_ || jobs_.empty() || options_.sys_interval_s <= 0) {
    return;
  }
  sampling_ = true;
  sys_timer_.expires_after(
      std::chrono::microseconds(static_cast<int64_t>(options_.sys_interval_s * 1e6)));
  sys_timer_.async_wait([this](const boost::system::error_code& error) {
    sampling_ = false;
    if (!error) {
      SampleSys();
    }
  });
}

// A sys/* point goes at the job's last reported step, so it lines up with the job's own curves
// (its keys never collide with the job's: `sys/` is ours). The store keeps one point per
// (run, key, step) and, within an attempt, the first one (a later point at the same step is
// dropped). So a point is emitted only once the step has moved past the last sys point's; until
// then every sample still feeds the job's CPU window, and the point averages CPU over the time
// since the previous point (memory and accelerators are the latest sample). A job that reports
// no steps gets one point, at step 0. In a gang only rank 0 reports, as for the job's metrics.
// The points carry no output mark: like `started`, a point not yet journaled when the agent dies
// is simply not sent (the next agent samples afresh).
void Runner::SampleSys() {
  const absl::StatusOr<std::string> stat_text = fs::ReadFile("/proc/stat");
  const std::optional<sysstat::HostCpu> host =
      stat_text.ok() ? sysstat::ParseHostCpu(*stat_text) : std::nullopt;
  const absl::StatusOr<std::string> meminfo = fs::ReadFile("/proc/meminfo");
  const std::optional<double> mem_available =
      meminfo.ok() ? sysstat::ParseMemAvailableMb(*meminfo) : std::nullopt;
  const double ticks_per_second = static_cast<double>(std::max(1L, sysconf(_SC_CLK_TCK)));
  const int64_t page_size = std::max(1L, sysconf(_SC_PAGESIZE));
  const double now = MonotonicNow();
  // One pass over /proc for every job: processes selected by their group, the job's pgid.
  std::map<pid_t, std::vector<sysstat::ProcStat>> groups = sysstat::ScanGroups();
  for (auto& [key, job] : jobs_) {
    const bool reports_metrics = job->spec.world_size() <= 1 || job->spec.rank() == 0;
    if (job->pgid <= 0 || job->finishing || !reports_metrics) {
      continue;
    }
    auto group = groups.find(job->pgid);
    if (group == groups.end()) {
      continue;  // the job is over; its exit follows
    }
    if (!job->sys) {
      job->sys = std::make_unique<sysstat::JobSampler>(ticks_per_second);
    }
    job->sys->Observe(group->second, host.value_or(sysstat::HostCpu{}), now);
    if (job->sys_step.has_value() && job->last_step <= *job->sys_step) {
      continue;
    }
    std::optional<sysstat::JobSampler::Rates> rates = job->sys->Take();
    if (!rates.has_value()) {
      continue;  // the first sample is only the CPU baseline
    }
    std::vector<std::pair<std::string, double>> points =
        sysstat::JobPoints(*rates, group->second, mem_available, page_size);
    if (accelerators_) {
      for (auto& point : accelerators_->Latest()) {
        points.push_back(std::move(point));
      }
    }
    job->sys_step = job->last_step;
    Emit(*job, MetricsEvent(job->last_step, points), std::nullopt);
  }
  ScheduleSysSample();
}

void Runner::WatchChildren() {
  sigchld_.async_wait([this](const boost::system::error_code& error, int) {
    if (error) {
      return;
    }
    int status = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      for (auto& [key, job] : jobs_) {
        if (job->supervisor == pid) {
          job->supervisor_reaped = true;
          if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            spdlog::warn("run r{}: supervisor exited with status {}", job->spec.run_id(), status);
          }
          break;
        }
      }
    }
    WatchChildren();
  });
}

void Runner::Cancel(int64_t run_id, int attempt, const std::string& reason) {
  auto it = jobs_.find({run_id, attempt});
  if (it == jobs_.end()) {
    return;
  }
  Terminate(it->second, reason);
}

void Runner::Terminate(std::shared_ptr<Job> job, const std::string& reason) {
  if (job->cancel_requested) {
    return;
  }
  job->cancel_requested = true;
  job->cancel_reason = reason.empty() ? "cancelled" : reason;
  // Remembered on disk: an agent restarted before the job ends still reports it cancelled.
  (void)fs::WriteFileAtomically(job->job_dir + "/cancel", job->cancel_reason,
                                {0644, fs::Durability::kNone});
  spdlog::info("run r{}: cancelling ({})", job->spec.run_id(), job->cancel_reason);
  Poll();  // signals at once when the group is known
}

void Runner::InterruptAll(const std::string& reason) {
  for (auto& [key, job] : jobs_) {
    if (!job->cancel_requested) {
      job->interrupted = true;
    }
  }
  std::vector<std::shared_ptr<Job>> jobs;
  for (auto& [key, job] : jobs_) {
    jobs.push_back(job);
  }
  for (const std::shared_ptr<Job>& job : jobs) {
    Terminate(job, reason);
  }
}

std::vector<std::pair<int64_t, int>> Runner::Held() const {
  std::vector<std::pair<int64_t, int>> out;
  for (const auto& [key, job] : jobs_) {
    out.push_back(key);
  }
  return out;
}

void Runner::Finish(std::shared_ptr<Job> job) {
  // The supervisor died without recording an exit while the job's group lives. A machine going
  // away takes both within moments; a job that killed its supervisor outlives it. So the group
  // gets kOrphanGraceMs before it counts as having outlived it (Poll calls back meanwhile).
  if (!job->interrupted && !job->cancel_requested && job->pgid > 0 &&
      !std::filesystem::exists(job->job_dir + "/exit") && kill(-job->pgid, 0) == 0) {
    const auto now = std::chrono::steady_clock::now();
    if (!job->orphaned_at.has_value()) {
      job->orphaned_at = now;
    }
    if (now - *job->orphaned_at < std::chrono::milliseconds(kOrphanGraceMs)) {
      return;
    }
    job->outlived_supervisor = true;
  }
  job->finishing = true;
  WarnUnmatchedPatterns(*job);
  if (!job->started_emitted) {  // it ended between two polls, before we saw its group
    if (absl::StatusOr<std::string> pgid = fs::ReadFile(job->job_dir + "/pgid"); pgid.ok()) {
      job->pgid = static_cast<pid_t>(ParseIntOr(*pgid, 0));
    }
    if (job->pgid > 0) {  // else the job never started: its supervisor failed first
      EmitStarted(*job);
    }
  }
  job->kill_timer.cancel();
  int exit_code = -1;
  int signo = 0;
  bool gone = false;
  bool supervisor_killed_under_job = false;
  std::string reason;
  absl::StatusOr<std::string> exit_text = fs::ReadFile(job->job_dir + "/exit");
  if (exit_text.ok()) {
    std::vector<std::string> parts = absl::StrSplit(absl::StripAsciiWhitespace(*exit_text), ' ');
    if (parts.size() == 3) {
      exit_code = static_cast<int>(ParseIntOr(parts[0], -1));
      signo = static_cast<int>(ParseIntOr(parts[1], 0));
      gone = parts[2] == "1";
    }
  } else if (job->pgid <= 0) {
    // The supervisor ended before it started the job (it could not open the job's files, enter
    // the run directory, or be executed at all): its own words are the cause.
    reason = absl::StrCat("the job's supervisor (pid ", job->supervisor,
                          ") could not start the job: ", SupervisorLastWords(job->job_dir));
  } else {
    // The supervisor died (kill -9, OOM) without recording the exit: stop the job too. If the
    // job was still running, something killed its supervisor and not the job: on a worker whose
    // agent is not going away, the likeliest is the job itself (a pkill, a kill of its parent),
    // which is the job's failure, not a lost worker.
    supervisor_killed_under_job = job->outlived_supervisor && !job->interrupted;
    kill(-job->pgid, SIGKILL);
    reason = absl::StrCat(
        "the job's supervisor (pid ", job->supervisor, ") died without recording its exit",
        supervisor_killed_under_job ? " while the job still ran (was it killed by the job?): the "
                                      "job's failure"
                                    : "");
  }
  // A dead supervisor is the machine's fault (OOM killer, preemption), not the run's: taed
  // requeues it like a run whose agent went away. One that could not start the job is the
  // worker's fault before the job ran, which taed stops repeating (lifecycle::OnStartFault).
  const bool not_started = !exit_text.ok() && job->pgid <= 0 && !job->cancel_requested;
  const bool lost =
      !exit_text.ok() && !job->cancel_requested && !not_started && !supervisor_killed_under_job;
  const bool failed_by_agent = !job->fail_reason.empty() && !job->interrupted;
  if (failed_by_agent || supervisor_killed_under_job) {
    exit_code = exit_code > 0 ? exit_code : -1;  // never "succeeded"
  }
  tae::v1::Event event;
  tae::v1::RunExited* exited = event.mutable_exited();
  exited->set_cancelled(job->cancel_requested && !job->interrupted && !failed_by_agent);
  exited->set_interrupted(job->interrupted || lost);
  exited->set_infra(not_started && !job->interrupted);
  exited->set_not_started(not_started);
  exited->set_exit_code(exit_code);
  exited->set_signal(signo);
  if (!reason.empty()) {
    // already says what happened
  } else if (failed_by_agent) {
    reason = job->fail_reason;
  } else if (job->cancel_requested) {
    reason = job->cancel_reason;
  } else if (exit_code > 0) {
    reason = absl::StrCat("exit code ", exit_code);
    if (!job->last_stderr.empty()) {
      absl::StrAppend(&reason, ": ", job->last_stderr);
    }
    if (absl::StrContains(job->last_stderr, "No module named 'wandb'")) {
      absl::StrAppend(
          &reason, " (job.wandb = \"capture\" gives the job a wandb that sends its logs to TAE)");
    }
  } else if (signo > 0) {
    reason = absl::StrCat("killed by signal ", signo, " (", strsignal(signo), ")");
  }
  if (exit_text.ok() && !gone) {
    absl::StrAppend(&reason, reason.empty() ? "" : "; ", "process group ", job->pgid,
                    " still had members after SIGKILL");
  }
  exited->set_reason(reason);
  spdlog::info("run r{} attempt {} exited: code {} signal {}{}", job->spec.run_id(),
               job->spec.attempt(), exit_code, signo,
               reason.empty() ? "" : absl::StrCat(" (", reason, ")"));
  Emit(*job, std::move(event), std::nullopt);
  jobs_.erase({job->spec.run_id(), job->spec.attempt()});
}

}  // namespace tae::agent
