#include "agent/runner/runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/metrics/metric_line.h"
#include "common/process/spawn.h"
#include "spdlog/spdlog.h"

namespace tae::agent {
namespace {

constexpr size_t kMaxLogLine = 16 * 1024;
constexpr int kStdout = 0;
constexpr int kStderr = 1;
constexpr int kMetrics = 2;

double WallNow() {
  using namespace std::chrono;
  return duration_cast<duration<double>>(system_clock::now().time_since_epoch()).count();
}

}  // namespace

struct Runner::Job {
  Job(boost::asio::io_context* io) : kill_timer(*io) {}
  tae::v1::StartRun spec;
  pid_t pid = 0;
  std::string run_dir;
  std::vector<std::unique_ptr<boost::asio::posix::stream_descriptor>> pipes;
  std::array<std::string, 3> partial;
  std::array<std::array<char, 8192>, 3> buffers;
  int open_pipes = 0;
  bool exited = false;
  int wait_status = 0;
  bool cancel_requested = false;
  bool interrupted = false;
  std::string cancel_reason;
  bool finishing = false;
  bool command = false;  // the user's command: its stdout's key=value lines are metrics too
  int64_t last_step = 0;
  std::string last_stderr;  // the likely explanation of a failure
  boost::asio::steady_timer kill_timer;
};

Runner::Runner(boost::asio::io_context* io, RunnerOptions options, EventSink sink)
    : io_(io), options_(std::move(options)), sink_(std::move(sink)), sigchld_(*io, SIGCHLD) {
  // Orphaned grandchildren of a job are re-parented to us, so we can reap them and prove a
  // process group is empty.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  WatchChildren();
}

Runner::~Runner() {
  for (auto& [key, job] : jobs_) {
    if (job->pid > 0) {
      kill(-job->pid, SIGKILL);
    }
  }
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
  std::error_code ec;
  std::filesystem::create_directories(job->run_dir, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot create ", job->run_dir, ": ", ec.message()));
  }
  process::SpawnRequest request;
  if (job->command) {
    request.argv = {"/bin/sh", "-c", start.command()};
  } else {
    // Written beside and renamed over: a run.json in the snapshot is a hard link into the cache,
    // which writing through it would corrupt.
    const std::string tmp = job->run_dir + "/.run.json.tmp";
    {
      std::ofstream spec(tmp, std::ios::trunc);
      spec << start.config_json() << "\n";
      if (!spec) {
        return absl::InternalError(absl::StrCat("cannot write ", tmp));
      }
    }
    std::filesystem::rename(tmp, job->run_dir + "/run.json", ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot write ", job->run_dir, "/run.json: ", ec.message()));
    }
    request.argv = {options_.train_binary, "--spec", "run.json"};
  }
  request.metrics_pipe = true;
  request.env_remove = {"TAE_AGENT_TOKEN"};  // the job never sees the agent's credentials
  request.cwd = job->run_dir;
  request.env = {
      {"TAE_RUN_ID", absl::StrCat(start.run_id())},
      {"TAE_ATTEMPT", absl::StrCat(start.attempt())},
      {"TAE_EXPERIMENT", absl::StrCat(start.experiment_id())},
      {"TAE_VARIANT", start.variant()},
      {"TAE_SEED", absl::StrCat(start.seed())},
      {"TAE_RUN_DIR", job->run_dir},
      // Shared by the run's attempts on this agent: a re-queued attempt resumes from it.
      {"TAE_CHECKPOINT_DIR",
       absl::StrCat(options_.work_dir, "/runs/r", start.run_id(), "/checkpoint")},
      {"TAE_THREADS", absl::StrCat(options_.threads_per_run)},
      {"OMP_NUM_THREADS", absl::StrCat(options_.threads_per_run)},
      {"OPENBLAS_NUM_THREADS", absl::StrCat(options_.threads_per_run)},
      // Spinning OpenMP workers starve each other on shared cores (steps several times slower).
      {"OMP_WAIT_POLICY", "PASSIVE"},
  };
  if (job->command && !options_.python_dir.empty()) {
    const char* existing = std::getenv("PYTHONPATH");
    request.env.emplace_back("PYTHONPATH", existing != nullptr && *existing != '\0'
                                               ? absl::StrCat(options_.python_dir, ":", existing)
                                               : options_.python_dir);
  }
  absl::StatusOr<process::SpawnedProcess> spawned = process::Spawn(request);
  if (!spawned.ok()) {
    return spawned.status();
  }
  job->pid = spawned->pid;
  for (int fd : {spawned->stdout_fd, spawned->stderr_fd, spawned->metrics_fd}) {
    job->pipes.push_back(std::make_unique<boost::asio::posix::stream_descriptor>(*io_, fd));
  }
  job->open_pipes = 3;
  jobs_[{start.run_id(), start.attempt()}] = job;

  tae::v1::Event started;
  started.mutable_started()->set_pid(job->pid);
  started.mutable_started()->set_run_dir(job->run_dir);
  Emit(*job, std::move(started));
  for (int i = 0; i < 3; ++i) {
    ReadPipe(job, i);
  }
  spdlog::info("run r{} attempt {} started: pid {} in {}", start.run_id(), start.attempt(),
               job->pid, job->run_dir);
  return absl::OkStatus();
}

std::string Runner::RunDir(int64_t run_id, int attempt) const {
  return absl::StrCat(options_.work_dir, "/runs/r", run_id, "-a", attempt);
}

void Runner::Emit(const Job& job, tae::v1::Event event) {
  event.set_run_id(job.spec.run_id());
  event.set_attempt(job.spec.attempt());
  event.set_wall_time(WallNow());
  sink_(std::move(event));
}

void Runner::ReadPipe(std::shared_ptr<Job> job, int index) {
  job->pipes[index]->async_read_some(
      boost::asio::buffer(job->buffers[index]),
      [this, job, index](const boost::system::error_code& error, size_t n) {
        std::string& partial = job->partial[index];
        partial.append(job->buffers[index].data(), n);
        size_t start = 0;
        for (size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1) {
          OnLine(*job, index, partial.substr(start, nl - start));
        }
        partial.erase(0, start);
        if (partial.size() > kMaxLogLine) {
          OnLine(*job, index, std::move(partial));
          partial.clear();
        }
        if (!error) {
          ReadPipe(job, index);
          return;
        }
        if (!partial.empty()) {
          OnLine(*job, index, std::move(partial));
          partial.clear();
        }
        job->pipes[index]->close();
        job->open_pipes -= 1;
        MaybeFinish(job);
      });
}

void Runner::OnLine(Job& job, int index, std::string line) {
  if (line.size() > kMaxLogLine) {
    line.resize(kMaxLogLine);
  }
  if (index == kStderr && line.find_first_not_of(" \t\r") != std::string::npos) {
    job.last_stderr = line.substr(0, 300);
  }
  if (index != kMetrics) {
    std::optional<metrics::MetricRecord> record;
    if (index == kStdout && job.command) {
      record = metrics::ParseKeyValueLine(line);
    }
    tae::v1::Event event;
    event.mutable_log()->set_stream(index == kStdout ? "stdout" : "stderr");
    event.mutable_log()->set_text(std::move(line));
    Emit(job, std::move(event));
    if (record.has_value() && !record->values.empty()) {
      EmitMetrics(job, std::move(*record));
    }
    return;
  }
  if (line.find_first_not_of(" \t\r") == std::string::npos) {
    return;
  }
  absl::StatusOr<metrics::MetricRecord> record = metrics::ParseJsonLine(line);
  tae::v1::Event event;
  if (!record.ok()) {
    event.mutable_log()->set_stream("agent");
    event.mutable_log()->set_text(absl::StrCat(
        "bad metric line ignored: ", record.status().message(), ": ", line.substr(0, 200)));
    Emit(job, std::move(event));
    return;
  }
  if (!record->meta.empty()) {
    tae::v1::Event meta;
    auto* values = meta.mutable_meta()->mutable_values();
    for (auto& [key, value] : record->meta) {
      (*values)[key] = std::move(value);  // a repeated key: the last one wins
    }
    Emit(job, std::move(meta));
  }
  if (record->values.empty()) {
    return;
  }
  EmitMetrics(job, std::move(*record));
}

void Runner::EmitMetrics(Job& job, metrics::MetricRecord record) {
  job.last_step = record.step.value_or(job.last_step);
  tae::v1::Event event;
  tae::v1::MetricLine* metrics = event.mutable_metrics();
  metrics->set_step(job.last_step);
  for (auto& [key, value] : record.values) {
    tae::v1::Scalar* scalar = metrics->add_values();
    scalar->set_key(key);
    scalar->set_value(value);
  }
  Emit(job, std::move(event));
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
        if (job->pid == pid && !job->exited) {
          job->exited = true;
          job->wait_status = status;
          MaybeFinish(job);
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
  int64_t run_id = job->spec.run_id();
  job->cancel_requested = true;
  job->cancel_reason = reason.empty() ? "cancelled" : reason;
  spdlog::info("run r{}: cancelling ({})", run_id, job->cancel_reason);
  kill(-job->pid, SIGTERM);
  job->kill_timer.expires_after(std::chrono::milliseconds(options_.kill_grace_ms));
  job->kill_timer.async_wait([job](const boost::system::error_code& error) {
    if (!error && !job->finishing) {
      kill(-job->pid, SIGKILL);
    }
  });
}

void Runner::InterruptAll(const std::string& reason) {
  for (auto& [key, job] : jobs_) {
    if (!job->cancel_requested) {
      job->interrupted = true;
    }
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

void Runner::MaybeFinish(std::shared_ptr<Job> job) {
  if (!job->exited || job->open_pipes > 0 || job->finishing) {
    return;
  }
  job->finishing = true;
  job->kill_timer.cancel();
  kill(-job->pid, SIGKILL);  // whatever the leader left behind in its group goes too
  VerifyGroupGone(job, 0);
}

void Runner::VerifyGroupGone(std::shared_ptr<Job> job, int tries) {
  bool gone = kill(-job->pid, 0) != 0 && errno == ESRCH;
  if (!gone && tries < 250) {
    auto timer = std::make_shared<boost::asio::steady_timer>(*io_, std::chrono::milliseconds(20));
    timer->async_wait([this, job, tries, timer](const boost::system::error_code&) {
      VerifyGroupGone(job, tries + 1);
    });
    return;
  }
  int status = job->wait_status;
  tae::v1::Event event;
  tae::v1::RunExited* exited = event.mutable_exited();
  exited->set_cancelled(job->cancel_requested && !job->interrupted);
  exited->set_interrupted(job->interrupted);
  if (WIFEXITED(status)) {
    exited->set_exit_code(WEXITSTATUS(status));
  } else {
    exited->set_exit_code(-1);
    exited->set_signal(WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  }
  std::string reason;
  if (job->cancel_requested) {
    reason = job->cancel_reason;
  } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    reason = absl::StrCat("exit code ", WEXITSTATUS(status));
    if (!job->last_stderr.empty()) {
      absl::StrAppend(&reason, ": ", job->last_stderr);
    }
  } else if (WIFSIGNALED(status)) {
    reason =
        absl::StrCat("killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  }
  if (!gone) {
    absl::StrAppend(&reason, reason.empty() ? "" : "; ", "process group ", job->pid,
                    " still had members after SIGKILL");
  }
  exited->set_reason(reason);
  spdlog::info("run r{} attempt {} exited: status {}{}", job->spec.run_id(), job->spec.attempt(),
               status, reason.empty() ? "" : absl::StrCat(" (", reason, ")"));
  Emit(*job, std::move(event));
  jobs_.erase({job->spec.run_id(), job->spec.attempt()});
}

}  // namespace tae::agent
