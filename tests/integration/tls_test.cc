// TLS on the agent link through the real binaries: taed refuses an agent listener beyond loopback
// without TLS; with certificates from deploy/make-certs.sh an agent that trusts taed's CA registers
// and runs a job (link and stager both over TLS), while a plaintext agent, an agent trusting
// another CA and, under mTLS, an agent without a client certificate never register.

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "common/process/spawn.h"
#include "tests/integration/harness.h"
#include "tests/skip.h"

extern char** environ;

namespace tae::testing {
namespace {

namespace fs = std::filesystem;

const std::string kServerName = "taed.test";  // in the certificate; agents dial 127.0.0.1

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string MakeCertsScript() {
  return (fs::path(__FILE__).parent_path().parent_path().parent_path() / "deploy" / "make-certs.sh")
      .string();
}

bool HaveOpenssl() {
  return RunCommand({"/bin/sh", "-c", "command -v openssl"}, 30).exit_code == 0;
}

// deploy/make-certs.sh OUT_DIR NAMES...: ca, server (for names) and agent certificates.
void MakeCerts(const std::string& out_dir, const std::vector<std::string>& names) {
  std::vector<std::string> argv = {"/bin/bash", MakeCertsScript(), out_dir};
  argv.insert(argv.end(), names.begin(), names.end());
  CommandResult made = RunCommand(argv, 120);
  INFO("make-certs.sh: " << made.out << made.err);
  REQUIRE(made.exit_code == 0);
  for (const char* file :
       {"ca.pem", "ca.key", "server.pem", "server.key", "agent.pem", "agent.key"}) {
    REQUIRE(fs::exists(out_dir + "/" + file));
  }
  for (const char* key : {"ca.key", "server.key", "agent.key"}) {
    struct stat st {};
    REQUIRE(stat((out_dir + "/" + key).c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
  }
}

// A program in the background, in its own process group, its stdout and stderr appended to a
// log file. Stop() (or destruction) sends SIGTERM to the group, then SIGKILL if it outlives
// `grace_s`, and reaps it.
class Background {
 public:
  Background(std::vector<std::string> argv,
             const std::vector<std::pair<std::string, std::string>>& env, std::string log_path)
      : log_path_(std::move(log_path)) {
    process::SpawnRequest request;
    request.argv = std::move(argv);
    request.env = env;
    // The environment is ours without any TAE_* variable (the test decides them all).
    for (char** e = environ; *e != nullptr; ++e) {
      if (absl::StartsWith(*e, "TAE_")) {
        const std::string entry = *e;
        request.env_remove.push_back(entry.substr(0, entry.find('=')));
      }
    }
    request.log_path = log_path_;
    absl::StatusOr<process::SpawnedProcess> spawned = process::Spawn(request);
    INFO("spawn " << request.argv.at(0) << ": " << spawned.status().ToString());
    REQUIRE(spawned.ok());
    pid_ = spawned->pid;
  }
  ~Background() { Stop(); }

  bool Exited() {
    if (!reaped_ && waitpid(pid_, &status_, WNOHANG) == pid_) {
      reaped_ = true;
    }
    return reaped_;
  }

  // The exit code once exited (-1 when killed by a signal).
  int ExitCode() const { return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1; }

  void Stop(double grace_s = 15) {
    if (Exited()) {
      return;
    }
    kill(-pid_, SIGTERM);
    if (!WaitUntil([this] { return Exited(); }, grace_s)) {
      kill(-pid_, SIGKILL);
      waitpid(pid_, &status_, 0);
      reaped_ = true;
    }
  }

  std::string Log() const { return ReadFile(log_path_); }

 private:
  std::string log_path_;
  pid_t pid_ = -1;
  int status_ = 0;
  bool reaped_ = false;
};

// taed started directly (no `taectl up`) with --agents 0 and `args`, on a fresh TAE_HOME; stopped
// by `taectl down`, and killed if that did not stop it.
class Taed {
 public:
  explicit Taed(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {BinPath("taed"), "--home", home_.path(), "--agents", "0"};
    argv.insert(argv.end(), args.begin(), args.end());
    process_ = std::make_unique<Background>(
        argv, std::vector<std::pair<std::string, std::string>>{}, home_.path() + "/taed.out");
    const std::string addr_file = home_.path() + "/agent.addr";
    const bool ready = WaitUntil(
        [&] {
          return process_->Exited() ||
                 (fs::exists(addr_file) && fs::exists(home_.path() + "/taed.sock"));
        },
        60);
    INFO("taed: " << process_->Log());
    REQUIRE(ready);
    REQUIRE_FALSE(process_->Exited());
    address_ = std::string(absl::StripAsciiWhitespace(ReadFile(addr_file)));
    token_ = std::string(absl::StripAsciiWhitespace(ReadFile(home_.path() + "/agent.token")));
    REQUIRE(absl::StartsWith(address_, "127.0.0.1:"));
    REQUIRE_FALSE(token_.empty());
  }
  ~Taed() {
    RunCommand({BinPath("taectl"), "--home", home_.path(), "down"}, 60);
    process_->Stop();
  }

  const std::string& home() const { return home_.path(); }
  const std::string& address() const { return address_; }
  const std::string& token() const { return token_; }
  std::string Log() const { return process_->Log(); }

  CommandResult Taectl(std::vector<std::string> args, double timeout_s = 120) const {
    std::vector<std::string> argv = {BinPath("taectl"), "--home", home_.path()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, timeout_s);
  }

  // True when `taectl agents --json` lists agent `id`.
  bool Lists(const std::string& id) const {
    CommandResult listed = Taectl({"agents", "--json"}, 30);
    if (listed.exit_code != 0) {
      return false;
    }
    nlohmann::json agents = nlohmann::json::parse(listed.out, nullptr, false);
    if (!agents.is_array()) {
      return false;
    }
    for (const nlohmann::json& agent : agents) {
      if (agent.value("id", "") == id) {
        return true;
      }
    }
    return false;
  }

 private:
  TempDir home_;  // declared first: outlives the process
  std::unique_ptr<Background> process_;
  std::string address_;
  std::string token_;
};

// A tae-agent `id` dialing taed with the right token and `tls_args`, working and logging in `dir`.
std::unique_ptr<Background> StartAgent(const Taed& taed, const TempDir& dir, const std::string& id,
                                       const std::vector<std::string>& tls_args) {
  std::vector<std::string> argv = {BinPath("tae-agent"),
                                   "--taed",
                                   taed.address(),
                                   "--id",
                                   id,
                                   "--slots",
                                   "1",
                                   "--work-dir",
                                   dir.path() + "/" + id,
                                   "--log-level",
                                   "debug"};
  argv.insert(argv.end(), tls_args.begin(), tls_args.end());
  return std::make_unique<Background>(
      argv, std::vector<std::pair<std::string, std::string>>{{"TAE_AGENT_TOKEN", taed.token()}},
      dir.path() + "/" + id + ".log");
}

// The agent logged a failed dial (at debug level) or a stream that broke at once: the link
// reports a stream as open before its connection is made.
bool LogsFailedDial(const std::string& log) {
  return log.find("cannot reach taed") != std::string::npos ||
         log.find("lost taed") != std::string::npos;
}

// What a failed TLS handshake leaves in a log (gRPC's and the agent's own words for it).
bool MentionsHandshakeFailure(const std::string& log) {
  for (const char* words : {"andshake", "SSL", "ssl", "Socket closed", "Connection reset"}) {
    if (log.find(words) != std::string::npos) {
      return true;
    }
  }
  return false;
}

TEST_CASE("taed refuses a non-loopback agent listener without TLS", "[tls]") {
  TempDir home;
  SECTION("no certificate at all") {
    CommandResult refused = RunCommand(
        {BinPath("taed"), "--home", home.path(), "--agents", "0", "--agent-listen", "0.0.0.0:0"},
        60);
    INFO(refused.out << refused.err);
    CHECK(refused.exit_code != 0);
    CHECK(refused.err.find("--agent-listen 0.0.0.0:0 is not a loopback address") !=
          std::string::npos);
    CHECK(refused.err.find("--tls-cert FILE --tls-key FILE") != std::string::npos);
    CHECK(refused.err.find("deploy/make-certs.sh") != std::string::npos);
    CHECK(refused.err.find("docs/security.md") != std::string::npos);
    CHECK_FALSE(fs::exists(home.path() + "/agent.addr"));
  }
  SECTION("a client CA without a server certificate") {
    CommandResult refused =
        RunCommand({BinPath("taed"), "--home", home.path(), "--agents", "0", "--agent-listen",
                    "0.0.0.0:0", "--tls-client-ca", home.path() + "/ca.pem"},
                   60);
    INFO(refused.out << refused.err);
    CHECK(refused.exit_code != 0);
    CHECK(refused.err.find("--tls-client-ca needs --tls-cert and --tls-key") != std::string::npos);
  }
  SECTION("a key that is not the certificate's") {
    if (!HaveOpenssl()) {
      TAE_SKIP("openssl is not installed");
    }
    MakeCerts(home.path() + "/certs", {kServerName});
    CommandResult refused =
        RunCommand({BinPath("taed"), "--home", home.path(), "--agents", "0", "--agent-listen",
                    "0.0.0.0:0", "--tls-cert", home.path() + "/certs/server.pem", "--tls-key",
                    home.path() + "/certs/agent.key"},
                   60);
    INFO(refused.out << refused.err);
    CHECK(refused.exit_code != 0);
    CHECK(refused.err.find("does not match the certificate") != std::string::npos);
  }
}

TEST_CASE("tae-agent refuses to send its token beyond loopback without TLS", "[tls]") {
  TempDir dir;
  CommandResult refused =
      RunCommand({"/usr/bin/env", "TAE_AGENT_TOKEN=secret", BinPath("tae-agent"), "--taed",
                  "192.0.2.1:7733", "--work-dir", dir.path()},
                 60);
  INFO(refused.out << refused.err);
  CHECK(refused.exit_code == 2);
  CHECK(refused.err.find("--taed 192.0.2.1:7733 is not a loopback address") != std::string::npos);
  CHECK(refused.err.find("--tls-ca") != std::string::npos);
}

TEST_CASE("an agent trusting taed's CA registers over TLS and runs a job", "[tls]") {
  if (!HaveOpenssl()) {
    TAE_SKIP("openssl is not installed");
  }
  TempDir certs;
  MakeCerts(certs.path(), {kServerName});
  Taed taed({"--agent-listen", "0.0.0.0:0", "--tls-cert", certs.path() + "/server.pem", "--tls-key",
             certs.path() + "/server.key"});
  TempDir agents;
  std::unique_ptr<Background> agent =
      StartAgent(taed, agents, "tls-agent",
                 {"--tls-ca", certs.path() + "/ca.pem", "--tls-server-name", kServerName});
  const bool listed = WaitUntil([&] { return taed.Lists("tls-agent"); }, 60);
  INFO("agent log: " << agent->Log());
  INFO("taed log: " << taed.Log());
  REQUIRE(listed);
  CHECK(agent->Log().find("dialing " + taed.address() + " (TLS)") != std::string::npos);

  // The job's script reaches the agent as a snapshot fetched by the stager: its channel is TLS too.
  TempDir src;
  fs::create_directories(src.path() + "/job");
  std::ofstream(src.path() + "/job/hello.sh") << "echo hello-over-tls\n";
  CommandResult run = taed.Taectl({"run", src.path() + "/job", "--", "sh", "hello.sh"}, 120);
  INFO("taectl run: " << run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(run.out.find("hello-over-tls") != std::string::npos);
  CHECK(run.err.find("fetched 1 blobs") != std::string::npos);
  agent->Stop();
}

TEST_CASE("agents without TLS or trusting another CA never register with a TLS listener", "[tls]") {
  if (!HaveOpenssl()) {
    TAE_SKIP("openssl is not installed");
  }
  TempDir certs;
  MakeCerts(certs.path(), {kServerName});
  TempDir other;
  MakeCerts(other.path(), {kServerName});  // a second CA, which did not sign taed's certificate
  Taed taed({"--agent-listen", "0.0.0.0:0", "--tls-cert", certs.path() + "/server.pem", "--tls-key",
             certs.path() + "/server.key"});
  TempDir agents;
  std::unique_ptr<Background> plaintext = StartAgent(taed, agents, "plaintext-agent", {});
  std::unique_ptr<Background> stranger =
      StartAgent(taed, agents, "other-ca-agent",
                 {"--tls-ca", other.path() + "/ca.pem", "--tls-server-name", kServerName});
  // Both keep dialing; neither may ever get as far as registering.
  CHECK_FALSE(
      WaitUntil([&] { return taed.Lists("plaintext-agent") || taed.Lists("other-ca-agent"); }, 4));
  CHECK_FALSE(plaintext->Exited());
  CHECK_FALSE(stranger->Exited());
  INFO("plaintext agent log: " << plaintext->Log());
  INFO("other-CA agent log: " << stranger->Log());
  INFO("taed log: " << taed.Log());
  CHECK(LogsFailedDial(plaintext->Log()));
  CHECK(taed.Log().find("Handshake failed") != std::string::npos);  // gRPC's words, on taed
  CHECK(MentionsHandshakeFailure(stranger->Log()));
  CHECK(LogsFailedDial(stranger->Log()));
  plaintext->Stop();
  stranger->Stop();
}

TEST_CASE("an agent still waiting to reach taed stops when asked, not at its enrolment deadline",
          "[agent]") {
  TempDir dir;
  // Nothing listens on port 1: every try is refused, and the agent waits to try again (for up to
  // five minutes) before its io loop, and its signal handlers, run.
  Background agent({BinPath("tae-agent"), "--taed", "127.0.0.1:1", "--id", "waiting", "--slots",
                    "1", "--work-dir", dir.path() + "/work"},
                   {{"TAE_AGENT_TOKEN", "an-enrolment-token"}}, dir.path() + "/agent.log");
  REQUIRE(WaitUntil(
      [&] { return agent.Log().find("cannot reach taed at 127.0.0.1:1") != std::string::npos; },
      60));
  agent.Stop(/*grace_s=*/30);  // SIGTERM; SIGKILL only if it is still there after 30 s
  INFO(agent.Log());
  CHECK(agent.ExitCode() == 0);  // it exited by itself
  CHECK(agent.Log().find("signal 15 before taed was reached: exiting") != std::string::npos);
}

TEST_CASE("with a client CA taed accepts only agents that present a certificate it signed",
          "[tls]") {
  if (!HaveOpenssl()) {
    TAE_SKIP("openssl is not installed");
  }
  TempDir certs;
  MakeCerts(certs.path(), {kServerName});
  Taed taed({"--agent-listen", "0.0.0.0:0", "--tls-cert", certs.path() + "/server.pem", "--tls-key",
             certs.path() + "/server.key", "--tls-client-ca", certs.path() + "/ca.pem"});
  TempDir agents;
  const std::vector<std::string> server_tls = {"--tls-ca", certs.path() + "/ca.pem",
                                               "--tls-server-name", kServerName};
  std::unique_ptr<Background> anonymous = StartAgent(taed, agents, "no-cert-agent", server_tls);
  std::vector<std::string> client_tls = server_tls;
  client_tls.insert(client_tls.end(), {"--tls-cert", certs.path() + "/agent.pem", "--tls-key",
                                       certs.path() + "/agent.key"});
  std::unique_ptr<Background> trusted = StartAgent(taed, agents, "cert-agent", client_tls);

  const bool accepted = WaitUntil([&] { return taed.Lists("cert-agent"); }, 60);
  INFO("agent with a certificate: " << trusted->Log());
  INFO("agent without: " << anonymous->Log());
  INFO("taed log: " << taed.Log());
  REQUIRE(accepted);
  CHECK(trusted->Log().find("(TLS with a client certificate)") != std::string::npos);
  // The anonymous agent started first and has been dialing all along; give it a few more seconds.
  CHECK_FALSE(WaitUntil([&] { return taed.Lists("no-cert-agent"); }, 3));
  CHECK_FALSE(anonymous->Exited());
  CHECK(LogsFailedDial(anonymous->Log()));
  trusted->Stop();
  anonymous->Stop();
}

}  // namespace
}  // namespace tae::testing
