// The ssh provider through the real binaries: Debian's sshd inside a network namespace, taed
// starting tae-agent there over ssh (key auth, strict host key checking, the agent link tunnelled
// back over the session). Needs root, iproute2 and openssh-server; elsewhere each test says it was
// skipped.

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/integration/harness.h"
#include "tests/integration/netns.h"
#include "tests/skip.h"

namespace tae::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// sshd listening on host_ip() inside its own network namespace (a one-host Slice), with a fresh
// host key and one authorized client key.
class SshServer {
 public:
  SshServer() {
    if (access("/usr/sbin/sshd", X_OK) != 0 || access("/usr/bin/ssh-keygen", X_OK) != 0) {
      why_not_ = "openssh-server is not installed";
      return;
    }
    slice_ = std::make_unique<Slice>(1, "taes", "taesb", 233);  // 10.233.x, apart from gang's
    if (!slice_->ok()) {
      why_not_ = "cannot create a network namespace (not root, or no iproute2)";
      return;
    }
    host_ip_ = slice_->HostIp(0);
    const std::string d = dir_.path();
    for (const char* key : {"client_key", "other_host_key"}) {
      REQUIRE(RunCommand({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", key, "-f",
                          d + "/" + key},
                         30)
                  .exit_code == 0);
    }
    std::filesystem::copy_file(d + "/client_key.pub", d + "/authorized_keys");
    sshd_ = std::make_unique<NsSshd>(slice_->Netns(0), host_ip_, d + "/authorized_keys");
    ok_ = sshd_->ok();
    if (!ok_) {
      why_not_ = sshd_->why_not();
      return;
    }
    std::ofstream(d + "/known_hosts") << host_ip_ << " " << sshd_->host_key_pub() << "\n";
    std::ofstream(d + "/wrong_known_hosts")
        << host_ip_ << " " << ReadAll(d + "/other_host_key.pub");
  }
  bool ok() const { return ok_; }
  const std::string& why_not() const { return why_not_; }
  const std::string& host_ip() const { return host_ip_; }
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }

  // An ssh-hosts.toml naming this server.
  std::string HostsFile(const std::string& known_hosts, const std::string& work_dir) const {
    return "[[host]]\n"
           "destination = \"root@" +
           host_ip_ +
           "\"\n"
           "id = \"ssh-box\"\n"
           "identity = \"" +
           Path("client_key") +
           "\"\n"
           "known_hosts = \"" +
           Path(known_hosts) +
           "\"\n"
           "slots = 1\n"
           "labels = { accelerator = \"cpu\", box = \"netns\" }\n"
           "tunnel_port = " +
           std::to_string(17000 + getpid() % 1000) +
           "\n"
           "work_dir = \"" +
           work_dir + "\"\n";
  }

 private:
  TempDir dir_;
  std::unique_ptr<Slice> slice_;
  std::unique_ptr<NsSshd> sshd_;  // stopped before its namespace goes
  std::string host_ip_;
  bool ok_ = false;
  std::string why_not_;
};

long RemoteAgent() { return FindProcess("tae-agent", "--id ssh-box"); }

bool Connected(Cluster& cluster, const std::string& id) {
  for (const nlohmann::json& agent : cluster.TaectlJson({"agents"})) {
    if (agent.at("id") == id && agent.at("state") != "lost") {
      return true;
    }
  }
  return false;
}

}  // namespace

TEST_CASE(
    "the ssh provider starts an agent over ssh, restarts it when it dies and stops it on down",
    "[ssh]") {
  SshServer server;
  if (!server.ok()) {
    TAE_SKIP(server.why_not());
  }
  TempDir work;
  setenv("TAE_AGENT_GRACE", "60", 1);
  auto cluster = std::make_unique<Cluster>(0, 1, [&](const std::string& home) {
    std::ofstream(home + "/ssh-hosts.toml") << server.HostsFile("known_hosts", work.path());
  });
  unsetenv("TAE_AGENT_GRACE");
  const std::string log = cluster->home() + "/logs/ssh-box.log";
  const bool up = WaitUntil([&] { return Connected(*cluster, "ssh-box"); }, 60);
  INFO("ssh log: " << ReadAll(log));
  INFO("taed log: " << ReadAll(cluster->home() + "/logs/taed.log"));
  REQUIRE(up);
  nlohmann::json agents = cluster->TaectlJson({"agents"});
  REQUIRE(agents.size() == 1);
  CHECK(agents[0].at("labels").at("provider") == "ssh");
  CHECK(agents[0].at("labels").at("box") == "netns");

  // A job runs on it, inside the namespace (the only place that has the namespace's address).
  TempDir src;
  std::ofstream(src.path() + "/where.sh") << "ip -o -4 addr show | grep -o '10\\.233\\.[0-9.]*'\n";
  CommandResult ran = cluster->Taectl({"run", src.path(), "--", "sh", "where.sh"}, 120);
  INFO("taectl run: " << ran.out << ran.err);
  REQUIRE(ran.exit_code == 0);
  CHECK(ran.out.find(server.host_ip()) != std::string::npos);

  // The agent dies: its session ends, taed starts a new one and the agent registers again.
  const long first = RemoteAgent();
  REQUIRE(first > 0);
  kill(static_cast<pid_t>(first), SIGKILL);
  CHECK(WaitUntil([&] { return RemoteAgent() > 0 && RemoteAgent() != first; }, 60));
  CHECK(WaitUntil([&] { return Connected(*cluster, "ssh-box"); }, 60));
  CHECK(ReadAll(cluster->home() + "/logs/taed.log").find("agent ssh-box exited") !=
        std::string::npos);
  // `taectl agents --provider` shows what the provider did: start (the ssh command), exit, start.
  const nlohmann::json shown = cluster->TaectlJson({"agents", "--provider"});
  std::vector<std::string> events;
  for (const nlohmann::json& event : shown.at("provider_events")) {
    CHECK(event.at("provider") == "ssh");
    CHECK(event.at("subject") == "ssh-box");
    events.push_back(event.at("event").get<std::string>());
  }
  CHECK(events == std::vector<std::string>{"start", "exit", "start"});
  const std::string command = shown.at("provider_events")[0].at("detail").get<std::string>();
  CHECK(command.find("ssh -T -o BatchMode=yes -o StrictHostKeyChecking=yes") != std::string::npos);
  CHECK(command.find("-R 127.0.0.1:") != std::string::npos);
  CHECK(command.find("--stdin") != std::string::npos);
  std::string token = ReadAll(cluster->home() + "/agent.token");
  token.erase(token.find_last_not_of("\n") + 1);
  REQUIRE(token.size() >= 16);
  CHECK(command.find(token) == std::string::npos);  // the token goes down stdin

  // `taectl down` stops the remote agent too.
  REQUIRE(cluster->Taectl({"down"}).exit_code == 0);
  CHECK(WaitUntil([&] { return RemoteAgent() == 0; }, 30));
  cluster.reset();
}

TEST_CASE("a host whose key is not the one in known_hosts gets no agent", "[ssh]") {
  SshServer server;
  if (!server.ok()) {
    TAE_SKIP(server.why_not());
  }
  TempDir work;
  Cluster cluster(0, 1, [&](const std::string& home) {
    std::ofstream(home + "/ssh-hosts.toml") << server.HostsFile("wrong_known_hosts", work.path());
  });
  const std::string log = cluster.home() + "/logs/ssh-box.log";
  CHECK(WaitUntil(
      [&] { return ReadAll(log).find("Host key verification failed") != std::string::npos; }, 30));
  CHECK(RemoteAgent() == 0);
  CHECK(cluster.TaectlJson({"agents"}).empty());
}

TEST_CASE("a bad ssh hosts file stops taed from starting and names the line", "[ssh]") {
  TempDir home;
  std::ofstream(home.path() + "/hosts.toml")
      << "[[host]]\ndestination = \"root@10.0.0.9\"\nslots = 0\n";
  CommandResult up = RunCommand({"/usr/bin/env", "TAE_SSH_HOSTS=" + home.path() + "/hosts.toml",
                                 BinPath("taed"), "--home", home.path() + "/data", "--agents", "0"},
                                60);
  INFO(up.out << up.err);
  CHECK(up.exit_code != 0);
  CHECK(up.err.find("hosts.toml:3:9: slots: expected an integer in 1..4096") != std::string::npos);
}

}  // namespace tae::testing
