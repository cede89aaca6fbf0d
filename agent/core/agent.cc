#include "agent/core/agent.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "boost/asio/post.hpp"
#include "spdlog/spdlog.h"

namespace tae::agent {
namespace {

constexpr size_t kMaxEventsPerBatch = 2000;
constexpr const char* kVersion = "0.1.0";

std::string HostName() {
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

}  // namespace

Agent::Agent(boost::asio::io_context* io, AgentOptions options)
    : io_(io),
      options_(std::move(options)),
      runner_(io, RunnerOptions{options_.work_dir, options_.train_binary, options_.threads_per_run},
              [this](tae::v1::Event event) { OnEvent(std::move(event)); }),
      heartbeat_timer_(*io) {}

void Agent::Start() {
  LinkCallbacks callbacks;
  callbacks.on_connected = [this] { boost::asio::post(*io_, [this] { OnConnected(); }); };
  callbacks.on_message = [this](tae::v1::TaedMessage message) {
    boost::asio::post(*io_, [this, message = std::move(message)] { OnMessage(message); });
  };
  callbacks.on_disconnected = [this](const std::string& why) {
    boost::asio::post(*io_, [this, why] { OnDisconnected(why); });
  };
  link_ = std::make_unique<Link>(options_.taed, options_.token, std::move(callbacks));
  link_->Start();
  Heartbeat();
}

void Agent::OnConnected() {
  tae::v1::AgentMessage message;
  tae::v1::Register* reg = message.mutable_register_();
  reg->set_agent_id(options_.id);
  reg->set_host(HostName());
  reg->set_slots(options_.slots);
  reg->set_version(kVersion);
  for (const auto& [key, value] : options_.labels) {
    (*reg->mutable_labels())[key] = value;
  }
  for (const auto& [run_id, attempt] : runner_.Held()) {
    tae::v1::HeldRun* held = reg->add_held_runs();
    held->set_run_id(run_id);
    held->set_attempt(attempt);
  }
  if (!link_->Send(std::move(message))) {
    return;  // the stream already broke; the link dials again
  }
  connected_ = true;
  journal_.ResetSent();
  spdlog::info("connected to taed at {} ({} unacked events to resend)", options_.taed,
               journal_.unacked());
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
    case tae::v1::TaedMessage::kStartRun: {
      absl::Status status = shutdown_done_ ? absl::UnavailableError("agent shutting down")
                                           : runner_.Start(message.start_run());
      if (!status.ok()) {
        spdlog::error("run r{}: {}", message.start_run().run_id(), status.ToString());
        tae::v1::Event exited;
        exited.set_run_id(message.start_run().run_id());
        exited.set_attempt(message.start_run().attempt());
        exited.mutable_exited()->set_exit_code(-1);
        exited.mutable_exited()->set_reason(
            absl::StrCat("agent could not start it: ", status.message()));
        // Placed while this agent was going away: not the run's fault, so taed requeues it.
        exited.mutable_exited()->set_interrupted(static_cast<bool>(shutdown_done_));
        OnEvent(std::move(exited));
      }
      return;
    }
    case tae::v1::TaedMessage::kCancelRun:
      runner_.Cancel(message.cancel_run().run_id(), message.cancel_run().attempt(),
                     message.cancel_run().reason());
      return;
    case tae::v1::TaedMessage::kAck:
      journal_.Ack(message.ack().seq());
      CheckShutdown();
      return;
    case tae::v1::TaedMessage::kRegistered:
    case tae::v1::TaedMessage::KIND_NOT_SET:
      return;
  }
}

void Agent::OnEvent(tae::v1::Event event) {
  journal_.Append(std::move(event));
  ScheduleFlush();
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
  while (connected_ && journal_.has_unsent()) {
    tae::v1::AgentMessage message;
    for (tae::v1::Event& event : journal_.TakeUnsent(kMaxEventsPerBatch)) {
      *message.mutable_events()->add_events() = std::move(event);
    }
    if (!link_->Send(std::move(message))) {
      connected_ = false;  // resent after the next Register
      return;
    }
  }
  CheckShutdown();
}

void Agent::Heartbeat() {
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
  auto timer =
      std::make_shared<boost::asio::steady_timer>(*io_, std::chrono::milliseconds(grace_ms));
  timer->async_wait([this, timer](const boost::system::error_code&) {
    if (shutdown_done_) {
      spdlog::warn("shutdown grace over with {} unacked events", journal_.unacked());
      auto done = std::move(shutdown_done_);
      shutdown_done_ = nullptr;
      done();
    }
  });
  CheckShutdown();
}

void Agent::CheckShutdown() {
  if (shutdown_done_ && runner_.idle() && journal_.unacked() == 0) {
    auto done = std::move(shutdown_done_);
    shutdown_done_ = nullptr;
    done();
  }
}

}  // namespace tae::agent
