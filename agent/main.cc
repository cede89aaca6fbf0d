// tae-agent: runs on every worker. Parses config (TAE_* environment < flags), wires the agent,
// runs its io loop until SIGTERM/SIGINT.

#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <istream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/core/agent.h"
#include "boost/asio/posix/stream_descriptor.hpp"
#include "boost/asio/read_until.hpp"
#include "boost/asio/signal_set.hpp"
#include "boost/asio/streambuf.hpp"
#include "common/auth/environment.h"
#include "common/cli/flags.h"
#include "common/cli/paths.h"
#include "common/log/log.h"
#include "common/log/rotate.h"
#include "common/tls/tls.h"
#include "spdlog/spdlog.h"

namespace {

absl::Status ParseLabels(const std::string& text, std::map<std::string, std::string>* labels) {
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (kv.first.empty() || kv.second.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--labels: '", item, "' is not key=value"));
    }
    (*labels)[kv.first] = kv.second;
  }
  return absl::OkStatus();
}

// A stop signal before the io loop's handlers are installed (while Start waits for taed).
volatile std::sig_atomic_t stop_signal = 0;
void OnStopSignal(int signo) { stop_signal = signo; }

}  // namespace

int main(int argc, char** argv) {
  tae::agent::AgentOptions options;
  options.taed = tae::cli::EnvOr("TAE_TAED", "127.0.0.1:7733");
  options.token = tae::cli::EnvOr("TAE_AGENT_TOKEN", "");
  // Read once, then gone from the environment: no job, and nothing else this process starts,
  // inherits the enrolment token or the credential, nor reads it in /proc/PID/environ.
  tae::auth::ScrubEnv("TAE_AGENT_TOKEN");
  options.id = tae::cli::EnvOr("TAE_AGENT_ID", "");
  options.work_dir = tae::cli::AbsolutePath(tae::cli::EnvOr("TAE_AGENT_DIR", "/tmp/tae-agent"));
  options.train_binary = tae::cli::ProgramDir() + "/tae-train";
  // Installed layout: PREFIX/bin/tae-agent and PREFIX/share/tae/python (the build tree mirrors it).
  options.python_dir = tae::cli::ProgramDir() + "/../share/tae/python";
  options.job_binary = tae::cli::AbsolutePath(
      tae::cli::EnvOr("TAE_JOB_BINARY", tae::cli::ProgramDir() + "/tae-job"));
  tae::tls::ClientFiles tls_files;
  tls_files.ca = tae::cli::AbsolutePath(tae::cli::EnvOr("TAE_TLS_CA", ""));
  tls_files.cert = tae::cli::AbsolutePath(tae::cli::EnvOr("TAE_TLS_CERT", ""));
  tls_files.key = tae::cli::AbsolutePath(tae::cli::EnvOr("TAE_TLS_KEY", ""));
  tls_files.server_name = tae::cli::EnvOr("TAE_TLS_SERVER_NAME", "");
  std::string labels = "accelerator=cpu";
  int threads = 0;
  std::string sys_interval_env = tae::cli::EnvOr("TAE_SYS_INTERVAL", "5");
  std::string log_level = "info";

  tae::cli::FlagSet flags(
      "usage: tae-agent [flags]\n\n"
      "Runs TAE jobs on this worker: dials taed's agent link, registers its slots and labels,\n"
      "runs each run as a child process and streams its metrics and logs back. TAE_AGENT_TOKEN\n"
      "(never a flag, so it does not show in ps) is either taed's enrolment token\n"
      "($TAE_HOME/agent.token): the agent enrols once and keeps its own credential in\n"
      "WORK_DIR/agent.credential; or a credential taed's provider made for it (ID.SECRET).\n"
      "Enrolling waits up to 5 minutes for taed to answer; SIGTERM or Ctrl-C stops it at once.\n\n"
      "Beyond loopback the link needs TLS: --tls-ca names the CA that signed taed's certificate\n"
      "(deploy/make-certs.sh, docs/security.md); without it a non-loopback --taed is refused, so\n"
      "the token never crosses the network in the clear.");
  flags.String("taed", &options.taed, "taed's agent link address host:port (TAE_TAED)");
  flags.Path("tls-ca", &tls_files.ca,
             "PEM CA that signed taed's certificate: dial with TLS (TAE_TLS_CA)");
  flags.Path("tls-cert", &tls_files.cert,
             "PEM client certificate, for a taed with --tls-client-ca (TAE_TLS_CERT)");
  flags.Path("tls-key", &tls_files.key, "PEM private key of --tls-cert, unencrypted (TAE_TLS_KEY)");
  flags.String("tls-server-name", &tls_files.server_name,
               "name taed's certificate must carry, when --taed's host is not in it, e.g. an IP "
               "(TAE_TLS_SERVER_NAME)");
  flags.String("id", &options.id, "agent id (default: hostname)");
  flags.Int("slots", &options.slots, "runs this agent runs at once");
  flags.String("labels", &labels, "comma-separated key=value labels");
  flags.Path("work-dir", &options.work_dir, "where run directories are made (TAE_AGENT_DIR)");
  flags.Path("train-binary", &options.train_binary, "path of tae-train");
  flags.Path("job-binary", &options.job_binary,
             "path of tae-job, each run's supervisor (TAE_JOB_BINARY; default: next to tae-agent)");
  flags.Int("threads", &threads, "threads per run (default: cores / slots)");
  flags.Path("python-dir", &options.python_dir,
             "directory of tae_log.py, put on command jobs' PYTHONPATH");
  flags.Double("sys-interval", &options.sys_interval_s,
               "seconds between a run's sys/* metric points (CPU, memory, accelerators); 0 "
               "turns them off (TAE_SYS_INTERVAL, default 5)");
  bool stdin_link = false;
  flags.Bool("stdin", &stdin_link,
             "for agents started over ssh (taed's ssh provider): the token is stdin's first line; "
             "a `stop` line stops the runs and exits; stdin closing (taed or the ssh link gone) "
             "exits and leaves the runs to be adopted");
  flags.String("log-level", &log_level, "trace, debug, info, warn or error");
  std::vector<std::string> positional;
  absl::Status parsed = absl::OkStatus();
  if (!absl::SimpleAtod(sys_interval_env, &options.sys_interval_s)) {
    parsed = absl::InvalidArgumentError(
        absl::StrCat("TAE_SYS_INTERVAL: '", sys_interval_env, "' is not a number of seconds"));
  }
  if (parsed.ok()) {
    parsed = flags.Parse({argv + 1, argv + argc}, &positional);
  }
  if (flags.help_requested()) {
    std::fputs(flags.Help().c_str(), stdout);
    return 0;
  }
  if (parsed.ok()) {
    parsed = ParseLabels(labels, &options.labels);
  }
  if (parsed.ok() && !(options.sys_interval_s >= 0 && options.sys_interval_s <= 3600)) {
    parsed = absl::InvalidArgumentError(
        "--sys-interval: must be 0 (off) or a number of seconds up to 3600");
  }
  if (parsed.ok() && options.slots < 1) {
    parsed = absl::InvalidArgumentError("--slots: must be at least 1");
  }
  if (parsed.ok()) {
    absl::StatusOr<tae::tls::ClientConfig> tls = tae::tls::LoadClientConfig(tls_files);
    if (tls.ok()) {
      options.tls = std::move(*tls);
    } else {
      parsed = tls.status();
    }
  }
  if (parsed.ok() && !options.tls.enabled() && !tae::tls::IsLoopback(options.taed)) {
    parsed = absl::InvalidArgumentError(
        absl::StrCat("--taed ", options.taed,
                     " is not a loopback address: beyond loopback the link needs TLS; set --tls-ca "
                     "(TAE_TLS_CA) to the CA that signed taed's certificate (docs/security.md)"));
  }
  if (!parsed.ok()) {
    std::fprintf(stderr, "tae-agent: %s\n", std::string(parsed.message()).c_str());
    return 2;
  }
  if (stdin_link) {
    // Byte by byte: nothing after the first line may be swallowed by a buffer.
    std::string line;
    char c = 0;
    while (read(STDIN_FILENO, &c, 1) == 1 && c != '\n') {
      line.push_back(c);
    }
    options.token = std::string(absl::StripTrailingAsciiWhitespace(line));
  }
  if (options.token.empty()) {
    std::fprintf(stderr,
                 "tae-agent: TAE_AGENT_TOKEN is not set (taed writes it to "
                 "$TAE_HOME/agent.token)\n");
    return 2;
  }
  if (options.id.empty()) {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    options.id = host;
  }
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  options.threads_per_run = threads > 0 ? threads : std::max(1, cores / options.slots);
  tae::log::Setup("tae-agent", log_level);

  boost::asio::io_context io;
  tae::agent::Agent agent(&io, options);
  // Its log (stderr: logs/agents/ID.log for a local agent) rotated by size.
  tae::log::StderrRotation log_rotation(&io);
  // --stdin: the ssh session is the agent's lifeline (see the flag's help).
  boost::asio::posix::stream_descriptor lifeline(io);
  boost::asio::streambuf lifeline_buffer;
  std::function<void()> read_lifeline = [&] {
    boost::asio::async_read_until(
        lifeline, lifeline_buffer, '\n', [&](const boost::system::error_code& error, size_t) {
          if (error) {
            spdlog::warn(
                "stdin closed (taed or its ssh link went away): exiting, runs go on "
                "under their supervisors");
            agent.Abandon();
            io.stop();
            return;
          }
          std::istream in(&lifeline_buffer);
          std::string line;
          std::getline(in, line);
          if (absl::StripAsciiWhitespace(line) == "stop") {
            spdlog::info("asked to stop on stdin: stopping runs and exiting");
            agent.Shutdown([&io] { io.stop(); });
            return;
          }
          read_lifeline();
        });
  };
  if (stdin_link) {
    lifeline.assign(dup(STDIN_FILENO));
    read_lifeline();
  }
  // A fault of the agent's own (its journal or work dir failed): it has told taed and stopped its
  // runs; exit non-zero so whoever supervises it sees the failure.
  agent.set_on_fatal([&io] { io.stop(); });
  // Until the io loop runs, a stop signal only sets a flag, which the wait for taed asks.
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGTERM, OnStopSignal);
  if (absl::Status started = agent.Start([] { return stop_signal != 0; }); !started.ok()) {
    if (stop_signal != 0) {
      spdlog::info("signal {} before taed was reached: exiting", static_cast<int>(stop_signal));
      return 0;
    }
    std::fprintf(stderr, "tae-agent: %s\n", std::string(started.message()).c_str());
    return 1;
  }
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& error, int signo) {
    if (error) {
      return;
    }
    spdlog::info("signal {}: stopping runs and exiting", signo);
    agent.Shutdown([&io] { io.stop(); });
  });
  // taed (our parent, for local agents) died: leave the runs to their supervisors and exit; the
  // agent the next taed starts on this work dir adopts them.
  boost::asio::signal_set abandon(io, SIGUSR1);
  abandon.async_wait([&](const boost::system::error_code& error, int) {
    if (error) {
      return;
    }
    spdlog::warn("taed went away: exiting, runs go on under their supervisors");
    agent.Abandon();
    io.stop();
  });
  if (stop_signal != 0) {
    raise(stop_signal);  // came as it started: the io loop's handler takes it
  }
  spdlog::info("agent {} ({} slots, {} threads per run) dialing {} ({})", options.id, options.slots,
               options.threads_per_run, options.taed,
               !options.tls.enabled()         ? "plaintext"
               : options.tls.cert_pem.empty() ? "TLS"
                                              : "TLS with a client certificate");
  io.run();
  return agent.fatal() ? 3 : 0;
}
