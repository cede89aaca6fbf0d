#include "tests/integration/fake_tpu_api.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "common/process/spawn.h"

namespace tae::testing {

std::string FakeTpuDir() {
  // __FILE__ is tests/integration/fake_tpu_api.cc, absolute under CMake.
  std::filesystem::path here(__FILE__);
  if (here.is_relative()) {
    here = std::filesystem::path(TAE_BIN_DIR) / ".." / ".." / here;
  }
  return (here.parent_path().parent_path() / "fake_tpu").string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

nlohmann::json Http(int port, const std::string& method, const std::string& path,
                    const nlohmann::json& body) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return nlohmann::json::value_t::discarded;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return nlohmann::json::value_t::discarded;
  }
  std::string payload = body.is_null() ? "" : body.dump();
  std::string request = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
                        "Connection: close\r\nContent-Type: application/json\r\n" +
                        "Content-Length: " + std::to_string(payload.size()) + "\r\n\r\n" + payload;
  for (size_t sent = 0; sent < request.size();) {
    ssize_t n = write(fd, request.data() + sent, request.size() - sent);
    if (n <= 0) {
      close(fd);
      return nlohmann::json::value_t::discarded;
    }
    sent += static_cast<size_t>(n);
  }
  std::string response;
  char buf[8192];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) {
    response.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  size_t start = response.find("\r\n\r\n");
  if (start == std::string::npos) {
    return nlohmann::json::value_t::discarded;
  }
  return nlohmann::json::parse(response.substr(start + 4), nullptr, false);
}

FakeTpu::FakeTpu() {
  gcloud_ = FindOnPath("gcloud");
  python_ = FindOnPath("python3");
  if (gcloud_.empty() || python_.empty()) {
    return;
  }
  std::string port_file = dir_.path() + "/port";
  std::string log = dir_.path() + "/fake_tpu.log";
  process::SpawnRequest request;
  request.argv = {python_, FakeTpuDir() + "/fake_tpu.py", "--port", "0", "--port-file", port_file};
  request.log_path = log;  // a fresh directory's file
  absl::StatusOr<process::SpawnedProcess> spawned = process::Spawn(request);
  INFO("spawn fake_tpu.py: " << spawned.status().ToString());
  REQUIRE(spawned.ok());
  pid_ = spawned->pid;
  bool up = WaitUntil(
      [&] {
        std::string text = ReadFile(port_file);
        return !text.empty() && text.back() == '\n';
      },
      30);
  INFO("fake_tpu.py log: " << ReadFile(log));
  REQUIRE(up);
  port_ = std::stoi(ReadFile(port_file));
  CommandResult env = RunCommand(
      {"/bin/sh", FakeTpuDir() + "/gcloud_env.sh", dir_.path(), std::to_string(port_), kProject},
      30);
  INFO("gcloud_env.sh: " << env.out << env.err);
  REQUIRE(env.exit_code == 0);
  std::istringstream lines(env.out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) {
      env_.push_back(line);
    }
  }
  REQUIRE(env_ == std::vector<std::string>{"CLOUDSDK_CONFIG=" + dir_.path() + "/gcloud"});
}

FakeTpu::~FakeTpu() { StopProcessGroup(pid_); }

std::string FakeTpu::missing() const {
  if (gcloud_.empty()) {
    return "gcloud not found: no gcloud on PATH";
  }
  if (python_.empty()) {
    return "gcloud not found: python3 for the fake Cloud TPU API is not on PATH";
  }
  return "";
}

void FakeTpu::SetEnv(bool set) const {
  for (const std::string& var : env_) {
    const size_t eq = var.find('=');
    if (set) {
      setenv(var.substr(0, eq).c_str(), var.substr(eq + 1).c_str(), 1);
    } else {
      unsetenv(var.substr(0, eq).c_str());
    }
  }
}

CommandResult FakeTpu::Gcloud(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {"/usr/bin/env"};
  argv.insert(argv.end(), env_.begin(), env_.end());
  argv.push_back(gcloud_);
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, 120);
}

nlohmann::json FakeTpu::GcloudJson(std::vector<std::string> args) const {
  args.push_back("--format=json");
  CommandResult result = Gcloud(args);
  INFO("gcloud stderr: " << result.err);
  REQUIRE(result.exit_code == 0);
  nlohmann::json doc = nlohmann::json::parse(result.out, nullptr, false);
  INFO("gcloud stdout: " << result.out);
  REQUIRE_FALSE(doc.is_discarded());
  return doc;
}

CommandResult FakeTpu::Create(const std::string& name, const std::string& zone,
                              const std::string& type,
                              const std::vector<std::string>& extra) const {
  std::vector<std::string> args = {"compute", "tpus",      "tpu-vm", "create",
                                   name,      "--zone",    zone,     "--accelerator-type",
                                   type,      "--version", kVersion};
  args.insert(args.end(), extra.begin(), extra.end());
  return Gcloud(args);
}

nlohmann::json FakeTpu::Describe(const std::string& name, const std::string& zone) const {
  return GcloudJson({"compute", "tpus", "tpu-vm", "describe", name, "--zone", zone});
}

std::vector<std::string> FakeTpu::List(const std::string& zone) const {
  std::vector<std::string> names;
  for (const auto& node : GcloudJson({"compute", "tpus", "tpu-vm", "list", "--zone", zone})) {
    std::string name = node.at("name");
    names.push_back(name.substr(name.rfind('/') + 1));
  }
  return names;
}

nlohmann::json FakeTpu::Control(const std::string& method, const std::string& what,
                                const nlohmann::json& body) const {
  nlohmann::json reply = Http(port_, method, "/_control/" + what, body);
  REQUIRE_FALSE(reply.is_discarded());
  return reply;
}

}  // namespace tae::testing
