#include "client/commands/doctor.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "common/process/tool.h"

namespace tae::client::doctor {
namespace {

namespace fs = std::filesystem;

bool AnyFail(const std::vector<Check>& checks) {
  for (const Check& c : checks) {
    if (c.level == Level::kFail) {
      return true;
    }
  }
  return false;
}

tae::v1::AgentFacts::Dir Dir(uint64_t free_bytes) {
  tae::v1::AgentFacts::Dir dir;
  dir.set_role("work");
  dir.set_path("/w");
  dir.set_free_bytes(free_bytes);
  dir.set_total_bytes(100 * kGiB);
  return dir;
}

TEST_CASE("doctor: taed, home, socket and token") {
  Check down = CheckTaed(false, "/h", "taectl --home /h up");
  CHECK(down.level == Level::kFail);
  CHECK(down.what == "taed is not running on /h");
  CHECK(down.fix == "taectl --home /h up");
  CHECK(CheckTaed(true, "/h", "x").level == Level::kOk);

  CHECK(CheckHomeMode("/h", true, S_IFDIR | 0700).level == Level::kOk);
  Check open_home = CheckHomeMode("/h", true, S_IFDIR | 0755);
  CHECK(open_home.level == Level::kFail);
  CHECK(open_home.fix == "chmod 700 /h");
  CHECK(CheckHomeMode("/h", false, 0).level == Level::kWarn);

  CHECK(CheckSocket("/h/s", true, true, S_IFSOCK | 0600, true).level == Level::kOk);
  CHECK(CheckSocket("/h/s", true, true, S_IFSOCK | 0666, true).fix == "chmod 600 /h/s");
  CHECK(CheckSocket("/h/s", true, false, S_IFREG | 0600, false).level == Level::kFail);

  CHECK(CheckToken("/h/t", true, S_IFREG | 0600, "abc\n", "", true).level == Level::kOk);
  CHECK(CheckToken("/h/t", true, S_IFREG | 0644, "abc", "", true).fix == "chmod 600 /h/t");
  CHECK(CheckToken("/h/t", true, S_IFREG | 0600, "", "", true).level == Level::kFail);
  Check other = CheckToken("/h/t", true, S_IFREG | 0600, "abc\n", "xyz", true);
  CHECK(other.level == Level::kWarn);
  CHECK(other.fix == "export TAE_AGENT_TOKEN=$(cat /h/t)");
  CHECK(CheckToken("/h/t", false, 0, "", "", false).level == Level::kOk);
}

TEST_CASE("doctor: TLS files named by the environment") {
  CHECK(CheckTls({}).size() == 1);
  CHECK_FALSE(AnyFail(CheckTls({})));
  std::vector<TlsFile> good = {{"TAE_TLS_CERT", "/c.pem", true, S_IFREG | 0644, false},
                               {"TAE_TLS_KEY", "/k.pem", true, S_IFREG | 0600, true}};
  CHECK_FALSE(AnyFail(CheckTls(good)));
  std::vector<TlsFile> lonely = {good[0]};
  CHECK(AnyFail(CheckTls(lonely)));  // a certificate without its key
  std::vector<TlsFile> missing = {{"TAE_TLS_CA", "/nope.pem", false, 0, false}};
  CHECK(AnyFail(CheckTls(missing)));
  std::vector<TlsFile> loose = good;
  loose[1].mode = S_IFREG | 0644;
  std::vector<Check> checks = CheckTls(loose);
  CHECK_FALSE(AnyFail(checks));
  CHECK(checks[1].level == Level::kWarn);
  CHECK(checks[1].fix == "chmod 600 /k.pem");
}

TEST_CASE("doctor: versions, BLAS, libtorch, threads and disk") {
  CHECK(CheckVersion("tae-agent", "0.1.0", "0.1.0", "fix").level == Level::kOk);
  Check old = CheckVersion("tae-agent", "0.0.9", "0.1.0", "fix");
  CHECK(old.level == Level::kWarn);
  CHECK(old.what == "tae-agent is version 0.0.9, taectl is 0.1.0");

  CHECK(CheckBlas("/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3", "").level ==
        Level::kOk);
  Check reference = CheckBlas("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3", "w1");
  CHECK(reference.level == Level::kFail);
  CHECK(reference.fix == "on w1: sudo apt-get install libopenblas0-pthread");
  Check openmp = CheckBlas("/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3", "");
  CHECK(openmp.level == Level::kWarn);
  CHECK(absl::StrContains(openmp.fix,
                          "update-alternatives --set libblas.so.3-x86_64-linux-gnu "
                          "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"));
  CHECK(CheckBlas("", "").level == Level::kWarn);

  CHECK(CheckTorch("", "").level == Level::kWarn);
  CHECK(CheckTorch("/usr/lib/libtorch_cpu.so.1.13.0", "").what ==
        "libtorch 1.13.0 (/usr/lib/libtorch_cpu.so.1.13.0)");

  CHECK(CheckThreads(8, 4, 2, "w").level == Level::kOk);
  Check over = CheckThreads(8, 8, 2, "w");
  CHECK(over.level == Level::kWarn);
  CHECK(over.fix == "on w: restart tae-agent with --threads 4");

  CHECK(CheckDisk(Dir(50 * kGiB), "").level == Level::kOk);
  CHECK(CheckDisk(Dir(3 * kGiB), "").level == Level::kWarn);
  CHECK(CheckDisk(Dir(kGiB / 2), "").level == Level::kFail);
  CHECK(CheckDisk(Dir(50 * kGiB), "").what == "work dir /w: 50.0 GiB free of 100.0 GiB");
}

TEST_CASE("doctor: a TPU or GPU label needs a visible device") {
  tae::v1::AgentFacts none;
  CHECK(CheckAcceleratorLabels({{"accelerator", "cpu"}}, none, "w").empty());
  std::vector<Check> tpu = CheckAcceleratorLabels({{"accelerator", "tpu-v4"}}, none, "w");
  REQUIRE(tpu.size() == 1);
  CHECK(tpu[0].level == Level::kFail);
  CHECK(absl::StartsWith(tpu[0].fix, "on w: check the TPU runtime"));
  CHECK(CheckAcceleratorLabels({{"gpu", "a100"}}, none, "w").size() == 1);
  tae::v1::AgentFacts seen;
  seen.add_accelerators("tpu: /dev/accel0..3");
  CHECK(CheckAcceleratorLabels({{"accelerator", "TPU"}}, seen, "w").empty());
  CHECK(CheckAcceleratorLabels({{"accelerator", "gpu"}}, seen, "w").size() == 1);
  CHECK(DescribeAccelerators(seen).what == "accelerators: tpu: /dev/accel0..3");
}

TEST_CASE("doctor: an agent's group, exit code and JSON") {
  tae::v1::AgentInfo agent;
  agent.set_id("w1");
  agent.set_host("worker1");
  agent.set_state(tae::v1::AGENT_STATE_READY);
  agent.set_slots(2);
  agent.set_version("0.1.0");
  (*agent.mutable_labels())["accelerator"] = "cpu";
  tae::v1::AgentFacts* facts = agent.mutable_facts();
  facts->set_version("0.1.0");
  facts->set_cpu_count(8);
  facts->set_threads_per_run(4);
  facts->set_blas("/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3");
  facts->set_torch("/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13.0");
  tae::v1::AgentFacts::TorchEngine* engine = facts->mutable_torch_engine();
  engine->set_python("/usr/bin/python3");
  engine->set_python_version("3.11.2");
  engine->set_torch("1.13.0");
  engine->set_device("cpu");
  *facts->add_dirs() = Dir(50 * kGiB);
  Group good = AgentGroup(agent, "0.1.0");
  CHECK(good.name == "agent w1");
  CHECK(ExitCode({good}) == 0);
  nlohmann::ordered_json doc = RenderJson({good});
  CHECK(doc["ok"] == true);
  CHECK(doc["groups"][0]["detail"]["facts"]["cpu_count"] == 8);
  CHECK(doc["groups"][0]["detail"]["facts"]["dirs"][0]["free_bytes"] == 50 * kGiB);

  facts->set_blas("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3");
  facts->add_problems("nvidia-smi -L exited with status 9");
  agent.set_version("0.0.1");
  Group bad = AgentGroup(agent, "0.1.0");
  CHECK(ExitCode({good, bad}) == 1);
  std::string text = RenderText({bad});
  CHECK(absl::StrContains(text, "  FAIL  BLAS: /usr/lib/x86_64-linux-gnu/blas/libblas.so.3"));
  CHECK(absl::StrContains(text, "fix: on worker1: sudo apt-get install libopenblas0-pthread"));
  CHECK(absl::StrContains(text, "  warn  tae-agent is version 0.0.1, taectl is 0.1.0"));
  CHECK(absl::StrContains(text, "  warn  nvidia-smi -L exited with status 9"));
  CHECK(absl::StrContains(text, "1 failure(s), 2 warning(s)"));

  agent.set_state(tae::v1::AGENT_STATE_LOST);
  CHECK(ExitCode({AgentGroup(agent, "0.1.0")}) == 1);
}

// A fake gcloud on PATH, answering like the real one for `auth list` and `config get-value`.
struct FakeGcloud {
  FakeGcloud(const std::string& accounts_json, const std::string& project) {
    char tmpl[] = "/tmp/tae-gcloud-XXXXXX";
    dir = mkdtemp(tmpl);
    std::ofstream(dir + "/accounts.json") << accounts_json;
    std::ofstream script(dir + "/gcloud");
    script << "#!/bin/sh\n"
           << "case \"$1 $2\" in\n"
           << "  'auth list') cat '" << dir << "/accounts.json' ;;\n"
           << "  'config get-value') echo '" << project << "' ;;\n"
           << "  *) exit 2 ;;\n"
           << "esac\n";
    script.close();
    chmod((dir + "/gcloud").c_str(), 0755);
    saved_path = getenv("PATH") ? getenv("PATH") : "";
    setenv("PATH", (dir + ":/bin:/usr/bin").c_str(), 1);
  }
  ~FakeGcloud() {
    setenv("PATH", saved_path.c_str(), 1);
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string dir;
  std::string saved_path;
};

TEST_CASE("doctor: gcloud is checked only when a gcloud pool is configured") {
  CHECK(CheckGcloud(false).empty());
  {
    FakeGcloud gcloud(R"([{"account": "me@example.com", "status": "ACTIVE"}])", "my-project");
    std::vector<Check> checks = CheckGcloud(true);
    REQUIRE(checks.size() == 3);
    CHECK(checks[0].what == "gcloud account me@example.com");
    CHECK(checks[1].what == "gcloud project my-project");
    // The agents' sessions need ssh and ssh-keygen.
    const bool have_ssh =
        !process::FindOnPath("ssh").empty() && !process::FindOnPath("ssh-keygen").empty();
    CHECK(checks[2].what.find("ssh") != std::string::npos);
    CHECK((checks[2].level == Level::kFail) == !have_ssh);
    CHECK(AnyFail(checks) == !have_ssh);
  }
  {
    FakeGcloud gcloud("[]", "(unset)");
    std::vector<Check> checks = CheckGcloud(true);
    REQUIRE(checks.size() == 3);
    CHECK(checks[0].level == Level::kFail);
    CHECK(checks[0].fix == "gcloud auth login");
    CHECK(checks[1].fix == "gcloud config set project PROJECT_ID");
  }
  {
    std::string saved = getenv("PATH") ? getenv("PATH") : "";
    setenv("PATH", "/nonexistent", 1);
    std::vector<Check> checks = CheckGcloud(true);
    setenv("PATH", saved.c_str(), 1);
    REQUIRE(checks.size() == 1);
    CHECK(checks[0].level == Level::kFail);
  }
  CHECK(ActiveGcloudAccount(R"([{"account":"a","status":""},{"account":"b","status":"ACTIVE"}])") ==
        "b");
  CHECK(ActiveGcloudAccount("not json").empty());
}

}  // namespace
}  // namespace tae::client::doctor
