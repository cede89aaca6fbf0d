#include "bench/metrics/sim_agent.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "agent/journal/journal.h"
#include "agent/link/link.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/signal_set.hpp"
#include "boost/asio/steady_timer.hpp"

namespace tae::bench {
namespace {

constexpr const char* kKeys[] = {
    "train/loss",   "train/lr",         "train/grad_norm", "perf/tokens_per_s",
    "perf/step_ms", "perf/peak_rss_mb", "eval/loss",       "eval/acc",
    "eval/seq_acc", "eval/ppl",         "bench/k10",       "bench/k11",
    "bench/k12",    "bench/k13",        "bench/k14",       "bench/k15"};

double WallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

void Say(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

class SimAgent {
 public:
  SimAgent(boost::asio::io_context* io, SimAgentOptions options)
      : io_(io), options_(std::move(options)), progress_timer_(*io) {}

  void Start() {
    agent::LinkCallbacks callbacks;
    callbacks.on_connected = [this] { boost::asio::post(*io_, [this] { OnConnected(); }); };
    callbacks.on_message = [this](tae::v1::TaedMessage message) {
      boost::asio::post(*io_, [this, message = std::move(message)] { OnMessage(message); });
    };
    callbacks.on_disconnected = [this](const std::string& why) {
      boost::asio::post(*io_, [this, why] { OnDisconnected(why); });
    };
    link_ = std::make_unique<agent::Link>(options_.taed, options_.token, std::move(callbacks));
    link_->Start();
  }

  // SIGUSR1 from the parent: stream every run's lines.
  void Go() {
    if (going_) {
      return;
    }
    going_ = true;
    cpu_at_go_ = CpuSeconds();
    total_events_ = journal_.acked() + journal_.unacked() +
                    runs_.size() * static_cast<size_t>(options_.steps_per_run + 1);
    Progress();
    Pump();
  }

  void Stop() {
    progress_timer_.cancel();
    link_->Stop();
  }

 private:
  struct Run {
    int64_t id = 0;
    int attempt = 0;
    int64_t next_step = 1;
    bool exited = false;
  };

  void OnConnected() {
    tae::v1::AgentMessage message;
    tae::v1::Register* reg = message.mutable_register_();
    reg->set_agent_id(options_.id);
    reg->set_host("bench");
    reg->set_slots(options_.slots);
    reg->set_version("bench");
    for (const auto& [key, value] : options_.labels) {
      (*reg->mutable_labels())[key] = value;
    }
    for (const Run& run : runs_) {
      if (!run.exited || journal_.unacked() > 0) {
        tae::v1::HeldRun* held = reg->add_held_runs();
        held->set_run_id(run.id);
        held->set_attempt(run.attempt);
      }
    }
    if (!link_->Send(std::move(message))) {
      return;
    }
    if (reconnects_++ > 0) {
      std::fprintf(stderr, "reconnected; resending %zu unacked events\n", journal_.unacked());
    }
    connected_ = true;
    journal_.ResetSent();
    Flush();
  }

  void OnDisconnected(const std::string& why) {
    if (connected_ && !finished_) {
      std::fprintf(stderr, "lost taed: %s\n", why.c_str());
    }
    connected_ = false;
  }

  void OnMessage(const tae::v1::TaedMessage& message) {
    switch (message.kind_case()) {
      case tae::v1::TaedMessage::kStartRun: {
        Run run;
        run.id = message.start_run().run_id();
        run.attempt = message.start_run().attempt();
        runs_.push_back(run);
        tae::v1::Event started;
        started.set_run_id(run.id);
        started.set_attempt(run.attempt);
        started.set_wall_time(WallNow());
        started.mutable_started()->set_pid(getpid());
        journal_.Append(std::move(started));
        Flush();
        if (static_cast<int>(runs_.size()) == options_.slots) {
          Say("ready");
        }
        return;
      }
      case tae::v1::TaedMessage::kAck:
        journal_.Ack(message.ack().seq());
        ++acks_;
        Pump();
        return;
      case tae::v1::TaedMessage::kCancelRun:
        std::fprintf(stderr, "taed cancelled r%ld: %s\n",
                     static_cast<long>(message.cancel_run().run_id()),
                     message.cancel_run().reason().c_str());
        return;
      case tae::v1::TaedMessage::kRegistered:
      case tae::v1::TaedMessage::kScrap:
      case tae::v1::TaedMessage::kProfileRun:  // the simulated jobs are not profiled
      case tae::v1::TaedMessage::KIND_NOT_SET:
        return;
    }
  }

  // Appends lines until the window is full, round-robin over the runs like concurrent jobs.
  void Pump() {
    if (!going_ || finished_) {
      return;
    }
    const size_t window =
        static_cast<size_t>(options_.window_batches) * static_cast<size_t>(options_.batch_events);
    const double now = WallNow();
    size_t live = 0;
    for (const Run& run : runs_) {
      live += run.exited ? 0 : 1;
    }
    while (live > 0 && journal_.unacked() < window) {
      Run& run = runs_[next_run_++ % runs_.size()];
      if (run.exited) {
        continue;
      }
      journal_.Append(run.next_step <= options_.steps_per_run ? Line(run, now) : Exit(run, now));
      if (run.exited) {
        --live;
      }
    }
    Flush();
    if (live == 0 && journal_.unacked() == 0) {
      Finish();
    }
  }

  tae::v1::Event Line(Run& run, double now) {
    tae::v1::Event event;
    event.set_run_id(run.id);
    event.set_attempt(run.attempt);
    event.set_wall_time(now);
    tae::v1::MetricLine* line = event.mutable_metrics();
    const int64_t step = run.next_step++;
    line->set_step(step);
    const double x = static_cast<double>(step);
    for (int i = 0; i < options_.values_per_event; ++i) {
      tae::v1::Scalar* scalar = line->add_values();
      scalar->set_key(kKeys[i]);
      scalar->set_value(2.5 * std::exp(-x / 4000.0) + 0.01 * i +
                        1e-3 * static_cast<double>((step * 7919 + i) % 97));
    }
    points_ += options_.values_per_event;
    return event;
  }

  tae::v1::Event Exit(Run& run, double now) {
    tae::v1::Event event;
    event.set_run_id(run.id);
    event.set_attempt(run.attempt);
    event.set_wall_time(now);
    event.mutable_exited()->set_exit_code(0);
    run.exited = true;
    return event;
  }

  // As agent/core/agent.cc: everything unsent, in batches of at most batch_events.
  void Flush() {
    while (connected_ && journal_.has_unsent()) {
      tae::v1::AgentMessage message;
      for (tae::v1::Event& event : journal_.TakeUnsent(options_.batch_events)) {
        *message.mutable_events()->add_events() = std::move(event);
      }
      if (!link_->Send(std::move(message))) {
        connected_ = false;
        return;
      }
      ++batches_;
    }
  }

  void Progress() {
    if (finished_) {
      return;
    }
    Say("progress " + std::to_string(journal_.acked()) + " " + std::to_string(total_events_));
    progress_timer_.expires_after(std::chrono::seconds(1));
    progress_timer_.async_wait([this](const boost::system::error_code& error) {
      if (!error) {
        Progress();
      }
    });
  }

  void Finish() {
    finished_ = true;
    progress_timer_.cancel();
    char line[128];
    std::snprintf(line, sizeof(line), "done %lld %lld %.3f", static_cast<long long>(points_),
                  static_cast<long long>(batches_), CpuSeconds() - cpu_at_go_);
    Say(line);
    io_->stop();
  }

  boost::asio::io_context* io_;
  SimAgentOptions options_;
  agent::Journal journal_;
  std::unique_ptr<agent::Link> link_;
  boost::asio::steady_timer progress_timer_;
  std::vector<Run> runs_;
  size_t next_run_ = 0;
  bool connected_ = false;
  bool going_ = false;
  bool finished_ = false;
  int reconnects_ = 0;
  int64_t points_ = 0;
  int64_t batches_ = 0;
  int64_t acks_ = 0;
  uint64_t total_events_ = 0;
  double cpu_at_go_ = 0;
};

}  // namespace

const char* SimMetricKey(int index) { return kKeys[index]; }

int RunSimAgent(const SimAgentOptions& options) {
  if (options.values_per_event < 1 ||
      options.values_per_event > static_cast<int>(sizeof(kKeys) / sizeof(kKeys[0]))) {
    std::fprintf(stderr, "--values: 1 to %zu\n", sizeof(kKeys) / sizeof(kKeys[0]));
    return 2;
  }
  boost::asio::io_context io;
  SimAgent agent(&io, options);
  boost::asio::signal_set go(io, SIGUSR1);
  go.async_wait([&agent](const boost::system::error_code& error, int) {
    if (!error) {
      agent.Go();
    }
  });
  boost::asio::signal_set stop(io, SIGINT, SIGTERM);
  stop.async_wait([&io](const boost::system::error_code& error, int) {
    if (!error) {
      io.stop();
    }
  });
  agent.Start();
  io.run();
  agent.Stop();
  return 0;
}

}  // namespace tae::bench
