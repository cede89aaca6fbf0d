// taectl doctor: the decisions. Every function here maps gathered facts to ok / warn / FAIL and,
// for a problem, the command that fixes it.

#include <algorithm>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/commands/doctor.h"
#include "common/fs/fs.h"
#include "common/host/host.h"
#include "common/process/tool.h"
#include "proto/tae/v1/states.h"
#include "server/provider/gke_pools.h"

namespace tae::client::doctor {
namespace {

Check Ok(std::string what) { return {Level::kOk, std::move(what), ""}; }
Check Warn(std::string what, std::string fix) {
  return {Level::kWarn, std::move(what), std::move(fix)};
}
Check Fail(std::string what, std::string fix) {
  return {Level::kFail, std::move(what), std::move(fix)};
}

std::string Bytes(uint64_t bytes) {
  return absl::StrFormat("%.1f GiB", static_cast<double>(bytes) / static_cast<double>(kGiB));
}

std::string Mode(mode_t mode) { return absl::StrFormat("%04o", mode & 07777); }

// "tpu-v4" / "TPU" -> "tpu"; "gpu", "cuda", "a100" style values -> "gpu"; else "".
std::string AcceleratorKind(std::string text) {
  text = absl::AsciiStrToLower(text);
  if (absl::StrContains(text, "tpu")) {
    return "tpu";
  }
  if (absl::StrContains(text, "gpu") || absl::StrContains(text, "cuda") ||
      absl::StrContains(text, "nvidia")) {
    return "gpu";
  }
  return "";
}

}  // namespace

const char* ToString(Level level) {
  switch (level) {
    case Level::kOk:
      return "ok";
    case Level::kWarn:
      return "warn";
    case Level::kFail:
      return "FAIL";
  }
  return "?";
}

std::string OnHost(const std::string& host) {
  return host.empty() ? "" : absl::StrCat("on ", host, ": ");
}

Check CheckTaed(bool reachable, const std::string& home, const std::string& up_command) {
  if (reachable) {
    return Ok(absl::StrCat("taed answers on ", home, "/taed.sock"));
  }
  return Fail(absl::StrCat("taed is not running on ", home), up_command);
}

Check CheckHomeMode(const std::string& home, bool exists, mode_t mode) {
  if (!exists) {
    return Warn(absl::StrCat("$TAE_HOME ", home, " does not exist yet"),
                "taectl up (creates it, mode 0700)");
  }
  if ((mode & 077) != 0) {
    // Anyone who can reach the directory can open the socket: the Control API has no token.
    return Fail(absl::StrCat("$TAE_HOME ", home, " is mode ", Mode(mode),
                             ": other users can reach taed's socket and the agent token"),
                absl::StrCat("chmod 700 ", home));
  }
  return Ok(absl::StrCat("$TAE_HOME ", home, " is private (", Mode(mode), ")"));
}

Check CheckSocket(const std::string& path, bool exists, bool is_socket, mode_t mode,
                  bool reachable) {
  if (!exists) {
    // Without taed there is no socket; the taed check already says how to start it.
    return Ok(absl::StrCat("socket ", path, ": none (taed makes it when it starts)"));
  }
  if (!is_socket) {
    return Fail(absl::StrCat(path, " is not a socket: taed cannot bind there"),
                absl::StrCat("rm ", path, " && taectl up"));
  }
  if ((mode & 077) != 0) {
    return Fail(absl::StrCat("socket ", path, " is mode ", Mode(mode)),
                absl::StrCat("chmod 600 ", path));
  }
  return Ok(absl::StrCat("socket ", path, " is user-only"));
}

Check CheckToken(const std::string& path, bool exists, mode_t mode, const std::string& content,
                 const std::string& env_token, bool reachable) {
  if (!exists) {
    return reachable ? Warn(absl::StrCat("no agent token at ", path),
                            "taectl down && taectl up (taed writes it at start)")
                     : Ok(absl::StrCat("agent token: none yet (taed writes ", path, ")"));
  }
  if ((mode & 077) != 0) {
    return Fail(absl::StrCat("agent token ", path, " is mode ", Mode(mode),
                             ": whoever reads it can pose as an agent"),
                absl::StrCat("chmod 600 ", path));
  }
  std::string token(absl::StripAsciiWhitespace(content));
  if (token.empty()) {
    return Fail(absl::StrCat("agent token ", path, " is empty"),
                absl::StrCat("taectl down && rm ", path, " && taectl up"));
  }
  if (!env_token.empty() && env_token != token) {
    return Warn(absl::StrCat("$TAE_AGENT_TOKEN in this shell is not the token in ", path,
                             ": agents started from here are refused"),
                absl::StrCat("export TAE_AGENT_TOKEN=$(cat ", path, ")"));
  }
  return Ok(absl::StrCat("agent token ", path, " is user-only"));
}

std::vector<Check> CheckTls(const std::vector<TlsFile>& files) {
  std::vector<Check> checks;
  bool cert = false;
  bool key = false;
  for (const TlsFile& f : files) {
    cert |= f.var == "TAE_TLS_CERT";
    key |= f.var == "TAE_TLS_KEY";
    if (!f.readable) {
      checks.push_back(Fail(absl::StrCat(f.var, "=", f.path, " cannot be read"),
                            absl::StrCat("point ", f.var,
                                         " at an existing PEM file (deploy/make-certs.sh makes "
                                         "them; docs/security.md)")));
    } else if (f.is_key && (f.mode & 077) != 0) {
      checks.push_back(Warn(absl::StrCat(f.var, "=", f.path, " is mode ", Mode(f.mode)),
                            absl::StrCat("chmod 600 ", f.path)));
    } else {
      checks.push_back(Ok(absl::StrCat(f.var, "=", f.path)));
    }
  }
  if (cert != key) {
    checks.push_back(Fail("TAE_TLS_CERT and TAE_TLS_KEY go together: only one is set",
                          "set both (docs/security.md)"));
  }
  if (files.empty()) {
    checks.push_back(Ok("TLS: not configured (agents must dial taed on loopback)"));
  }
  return checks;
}

Check CheckVersion(const std::string& who, const std::string& version,
                   const std::string& taectl_version, const std::string& fix) {
  if (version.empty()) {
    return Warn(
        absl::StrCat(who, " does not report its version (older than taectl ", taectl_version, "?)"),
        fix);
  }
  if (version != taectl_version) {
    return Warn(absl::StrCat(who, " is version ", version, ", taectl is ", taectl_version), fix);
  }
  return Ok(absl::StrCat(who, " ", version));
}

Check CheckBlas(const std::string& blas_path, const std::string& host) {
  using host::BlasKind;
  BlasKind kind = host::ClassifyBlas(blas_path);
  const std::string install =
      absl::StrCat(OnHost(host), "sudo apt-get install libopenblas0-pthread");
  switch (kind) {
    case BlasKind::kOpenblasPthread:
      return Ok(absl::StrCat("BLAS: OpenBLAS pthread (", blas_path, ")"));
    case BlasKind::kUnknown:
      return Warn(
          "BLAS: no libblas.so.3 alternative found; libtorch may use reference BLAS "
          "(~50x slower matrix maths)",
          install);
    case BlasKind::kOpenblasOther: {
      // The multiarch lib dir holds each BLAS in a directory of its own.
      std::filesystem::path lib_dir = std::filesystem::path(blas_path).parent_path().parent_path();
      return Warn(
          absl::StrCat("BLAS: ", blas_path, " is not the pthread OpenBLAS the trainer expects"),
          absl::StrCat(OnHost(host), "sudo apt-get install libopenblas0-pthread && ",
                       "sudo update-alternatives --set libblas.so.3-", lib_dir.filename().string(),
                       " ", (lib_dir / "openblas-pthread" / "libblas.so.3").string()));
    }
    case BlasKind::kReference:
    case BlasKind::kOther:
      return Fail(absl::StrCat("BLAS: ", blas_path, " is ", host::ToString(kind),
                               ": libtorch's matrix maths runs ~50x slower than with OpenBLAS"),
                  install);
  }
  return Warn("BLAS: unknown", install);
}

Check CheckTorch(const std::string& torch_path, const std::string& host) {
  if (torch_path.empty()) {
    return Warn("libtorch: libtorch_cpu.so not found in the library dirs (tae-train needs it)",
                absl::StrCat(OnHost(host), "sudo apt-get install libtorch-dev"));
  }
  std::string version = host::TorchVersionFromPath(torch_path);
  return Ok(absl::StrCat("libtorch ", version.empty() ? "" : version + " ", "(", torch_path, ")"));
}

Check CheckTorchEngine(const tae::v1::AgentFacts::TorchEngine& engine, const std::string& host) {
  const std::string fix = absl::StrCat(OnHost(host),
                                       "sudo apt-get install python3-torch (TPU VMs: torch and "
                                       "torch_xla with pip), or set TAE_PYTHON");
  if (!engine.error().empty()) {
    return Warn(
        absl::StrCat("torch engine: ", engine.python().empty() ? "" : engine.python() + ": ",
                     engine.error(), " (train.engine = \"torch\" runs would fail)"),
        fix);
  }
  if (engine.torch().empty()) {
    return Warn(absl::StrCat("torch engine: ", engine.python(), " ", engine.python_version(),
                             " cannot import torch (train.engine = \"torch\" runs would fail)"),
                fix);
  }
  std::string xla = engine.torch_xla().empty() ? "" : ", torch_xla " + engine.torch_xla();
  return Ok(absl::StrCat("torch engine: ", engine.python(), " ", engine.python_version(),
                         ", torch ", engine.torch(), xla, ", computes on ", engine.device()));
}

Check CheckThreads(int cpu_count, int threads_per_run, int slots, const std::string& host) {
  if (cpu_count <= 0) {
    return Warn("CPU count unknown", "");
  }
  if (threads_per_run <= 0 || slots <= 0) {
    return Ok(absl::StrCat(cpu_count, " CPUs"));
  }
  const int used = threads_per_run * slots;
  std::string what = absl::StrCat(cpu_count, " CPUs, ", slots, " slot(s) x ", threads_per_run,
                                  " thread(s) per run");
  if (used > cpu_count) {
    // Oversubscribed BLAS threads spin against each other: slower than fewer threads.
    return Warn(absl::StrCat(what, " oversubscribes the CPUs"),
                absl::StrCat(OnHost(host), "restart tae-agent with --threads ",
                             std::max(1, cpu_count / slots)));
  }
  return Ok(what);
}

Check CheckDisk(const tae::v1::AgentFacts::Dir& dir, const std::string& host) {
  const std::string name = absl::StrCat(dir.role(), " dir ", dir.path());
  const std::string fix =
      absl::StrCat(OnHost(host), "free space on the file system of ", dir.path(), " (`du -sh ",
                   dir.path(), "/*`; `taectl scrap` drops old snapshots)");
  if (!dir.error().empty()) {
    return Warn(absl::StrCat(name, ": cannot tell free space: ", dir.error()), "");
  }
  std::string what =
      absl::StrCat(name, ": ", Bytes(dir.free_bytes()), " free of ", Bytes(dir.total_bytes()));
  if (dir.free_bytes() < kDiskFailBytes) {
    return Fail(what, fix);
  }
  if (dir.free_bytes() < kDiskWarnBytes) {
    return Warn(absl::StrCat(what, " (under ", Bytes(kDiskWarnBytes), ")"), fix);
  }
  return Ok(what);
}

Check DescribeAccelerators(const tae::v1::AgentFacts& facts) {
  if (facts.accelerators_size() == 0) {
    return Ok("accelerators: none seen (CPU only)");
  }
  return Ok(absl::StrCat("accelerators: ", absl::StrJoin(facts.accelerators(), "; ")));
}

std::vector<Check> CheckAcceleratorLabels(const std::map<std::string, std::string>& labels,
                                          const tae::v1::AgentFacts& facts,
                                          const std::string& host) {
  std::vector<Check> checks;
  for (const auto& [key, value] : labels) {
    std::string kind = AcceleratorKind(key == "accelerator" ? value : key);
    if (kind.empty()) {
      continue;
    }
    bool seen = std::any_of(facts.accelerators().begin(), facts.accelerators().end(),
                            [&](const std::string& a) { return absl::StartsWith(a, kind + ":"); });
    if (!seen) {
      checks.push_back(Fail(
          absl::StrCat("label ", key, "=", value, " but no ", absl::AsciiStrToUpper(kind),
                       " is visible to the agent"),
          absl::StrCat(OnHost(host),
                       kind == "tpu" ? "check the TPU runtime (`ls /dev/accel* /dev/vfio`, "
                                       "`tpu-info`)"
                                     : "check the driver (`nvidia-smi -L`)",
                       ", or restart tae-agent without the label (--labels accelerator=cpu)")));
    }
  }
  return checks;
}

std::string ActiveGcloudAccount(const std::string& auth_list_json) {
  nlohmann::json doc = nlohmann::json::parse(auth_list_json, nullptr, false);
  if (!doc.is_array()) {
    return "";
  }
  for (const nlohmann::json& entry : doc) {
    if (entry.is_object() && entry.value("status", "") == "ACTIVE") {
      return entry.value("account", "");
    }
  }
  return "";
}

std::vector<Check> CheckGcloud(bool pool_configured, int timeout_ms) {
  std::vector<Check> checks;
  if (!pool_configured) {
    return checks;
  }
  std::string gcloud = process::FindOnPath("gcloud");
  if (gcloud.empty()) {
    checks.push_back(
        Fail("a gcloud pool is configured but gcloud is not on PATH",
             "install the Google Cloud CLI: https://cloud.google.com/sdk/docs/install"));
    return checks;
  }
  process::ToolResult auth =
      process::RunTool({gcloud, "auth", "list", "--format=json"}, timeout_ms);
  std::string account = auth.ok ? ActiveGcloudAccount(auth.out) : "";
  if (!auth.ok) {
    checks.push_back(Fail(absl::StrCat("gcloud auth list ", auth.error), "gcloud auth login"));
  } else if (account.empty()) {
    checks.push_back(Fail("gcloud has no active account", "gcloud auth login"));
  } else {
    checks.push_back(Ok(absl::StrCat("gcloud account ", account)));
  }
  process::ToolResult project =
      process::RunTool({gcloud, "config", "get-value", "project"}, timeout_ms);
  std::string name(absl::StripAsciiWhitespace(project.out));
  if (!project.ok || name.empty() || name == "(unset)") {
    checks.push_back(Fail("gcloud has no project set", "gcloud config set project PROJECT_ID"));
  } else {
    checks.push_back(Ok(absl::StrCat("gcloud project ", name)));
  }
  // taed starts the workers' agents through `gcloud ... tpu-vm ssh`, which runs ssh, after
  // making its key with ssh-keygen.
  const std::string ssh = process::FindOnPath("ssh");
  const std::string keygen = process::FindOnPath("ssh-keygen");
  if (ssh.empty() || keygen.empty()) {
    checks.push_back(Fail(absl::StrCat(ssh.empty() ? "ssh" : "ssh-keygen",
                                       " is not on PATH: taed cannot start agents on TPU VMs"),
                          "apt-get install openssh-client"));
  } else {
    checks.push_back(Ok(absl::StrCat("ssh for the TPU workers' agents: ", ssh)));
  }
  return checks;
}

std::vector<Check> CheckGke(const std::string& pools_path, int timeout_ms) {
  std::vector<Check> checks;
  absl::StatusOr<std::string> text = fs::ReadFile(pools_path);
  if (!text.ok()) {
    return checks;  // no GKE pools
  }
  absl::StatusOr<std::vector<provider::GkePool>> pools = provider::ParseGkePools(*text, pools_path);
  if (!pools.ok()) {
    checks.push_back(Fail(std::string(pools.status().message()),
                          absl::StrCat("fix ", pools_path, " (docs/providers.md, \"gke\")")));
    return checks;
  }
  const std::string kubectl = process::FindOnPath("kubectl");
  if (kubectl.empty() && !pools->empty()) {
    checks.push_back(Fail("a gke pool is configured but kubectl is not on PATH",
                          "apt-get install kubernetes-client (or the Google Cloud CLI's kubectl)"));
    return checks;
  }
  for (const provider::GkePool& pool : *pools) {
    std::vector<std::string> base = {kubectl};
    if (!pool.context.empty()) {
      base.insert(base.end(), {"--context", pool.context});
    }
    auto run = [&](std::vector<std::string> args) {
      std::vector<std::string> argv = base;
      argv.insert(argv.end(), args.begin(), args.end());
      return process::RunTool(argv, timeout_ms);
    };
    const std::string name = absl::StrCat("gke pool ", pool.name, ": ");
    const std::string context = pool.context.empty() ? "kubectl's current context" : pool.context;
    // The APIs the slices need, from the cluster's discovery.
    process::ToolResult jobset =
        run({"api-resources", "--api-group=jobset.x-k8s.io", "-o", "name"});
    if (!jobset.ok) {
      checks.push_back(Fail(
          absl::StrCat(name, "kubectl cannot reach the cluster of ", context, ": ", jobset.error),
          "gcloud container clusters get-credentials CLUSTER --location "
          "LOCATION (or kubectl config use-context NAME)"));
      continue;
    }
    bool failed = false;
    if (!absl::StrContains(jobset.out, "jobsets.jobset.x-k8s.io")) {
      checks.push_back(Fail(absl::StrCat(name, "the cluster of ", context,
                                         " has no JobSet API (jobsets.jobset.x-k8s.io)"),
                            "install JobSet: https://jobset.sigs.k8s.io/docs/installation/"));
      failed = true;
    }
    process::ToolResult kueue = run({"api-resources", "--api-group=kueue.x-k8s.io", "-o", "name"});
    if (!kueue.ok || !absl::StrContains(kueue.out, "localqueues.kueue.x-k8s.io") ||
        !absl::StrContains(kueue.out, "workloads.kueue.x-k8s.io")) {
      checks.push_back(Fail(absl::StrCat(name, "the cluster of ", context,
                                         " has no Kueue API (localqueues, workloads)"),
                            "install Kueue: https://kueue.sigs.k8s.io/docs/installation/"));
      failed = true;
    } else if (!run({"-n", pool.namespace_, "get", "localqueues.kueue.x-k8s.io", pool.local_queue,
                     "-o", "name"})
                    .ok) {
      checks.push_back(Fail(
          absl::StrCat(name, "no LocalQueue ", pool.local_queue, " in namespace ", pool.namespace_),
          absl::StrCat("a LocalQueue ", pool.local_queue, " in ", pool.namespace_,
                       " whose ClusterQueue has google.com/tpu quota (the cluster's admin makes "
                       "it; docs/providers.md, \"gke\")")));
      failed = true;
    }
    // What TAE does there: create and delete slices and their Secrets, read Kueue's Workloads.
    std::vector<std::string> denied;
    for (const auto& [verb, resource] :
         std::vector<std::pair<std::string, std::string>>{{"create", "jobsets.jobset.x-k8s.io"},
                                                          {"list", "jobsets.jobset.x-k8s.io"},
                                                          {"patch", "jobsets.jobset.x-k8s.io"},
                                                          {"delete", "jobsets.jobset.x-k8s.io"},
                                                          {"create", "secrets"},
                                                          {"list", "secrets"},
                                                          {"delete", "secrets"},
                                                          {"list", "workloads.kueue.x-k8s.io"}}) {
      if (!run({"-n", pool.namespace_, "auth", "can-i", verb, resource}).ok) {
        denied.push_back(absl::StrCat(verb, " ", resource));
      }
    }
    if (!denied.empty()) {
      checks.push_back(Fail(
          absl::StrCat(name, "not allowed in namespace ", pool.namespace_, ": ",
                       absl::StrJoin(denied, ", ")),
          absl::StrCat("a Role in ", pool.namespace_,
                       " granting create, get, list, watch, delete on jobsets.jobset.x-k8s.io "
                       "and secrets, and get, list, watch on workloads.kueue.x-k8s.io, bound to "
                       "you (ask the cluster's admin)")));
      failed = true;
    }
    if (!failed) {
      checks.push_back(Ok(absl::StrCat(name, context, ", JobSet and Kueue installed, LocalQueue ",
                                       pool.local_queue, " in ", pool.namespace_,
                                       ", allowed to create and delete slices")));
    }
  }
  return checks;
}

Group AgentGroup(const tae::v1::AgentInfo& agent, const std::string& taectl_version) {
  Group group;
  group.name = absl::StrCat("agent ", agent.id());
  const tae::v1::AgentFacts& facts = agent.facts();
  const std::string host = agent.host().empty() ? agent.id() : agent.host();
  if (agent.state() == tae::v1::AGENT_STATE_LOST) {
    group.checks.push_back(
        Fail(absl::StrCat("agent ", agent.id(), " on ", host, " is lost (not connected)"),
             absl::StrCat(OnHost(host),
                          "start tae-agent again (or `taectl down && taectl up` "
                          "for local agents)")));
  } else if (!agent.quarantine().empty()) {
    group.checks.push_back(
        Fail(absl::StrCat("agent ", agent.id(), " on ", host,
                          " is quarantined (takes no runs): ", agent.quarantine()),
             absl::StrCat(OnHost(host),
                          "fix the worker (its disk, its work dir), then `taectl "
                          "agents undrain ",
                          agent.id(), "`")));
  } else {
    group.checks.push_back(Ok(absl::StrCat(tae::v1::StateName(agent.state()), " on ", host, ", ",
                                           agent.slots(), " slot(s)")));
  }
  const std::string upgrade =
      absl::StrCat(OnHost(host), "install TAE ", taectl_version, " and restart tae-agent");
  group.checks.push_back(CheckVersion("tae-agent", agent.version(), taectl_version, upgrade));
  if (facts.version().empty()) {
    group.checks.push_back(Warn(
        "the agent reported no machine facts (a tae-agent older than taectl doctor)", upgrade));
  } else {
    group.checks.push_back(
        Ok(absl::StrCat("host ", facts.hostname(), ", kernel ", facts.kernel())));
    group.checks.push_back(
        CheckThreads(facts.cpu_count(), facts.threads_per_run(), agent.slots(), host));
    group.checks.push_back(CheckBlas(facts.blas(), host));
    group.checks.push_back(CheckTorch(facts.torch(), host));
    group.checks.push_back(CheckTorchEngine(facts.torch_engine(), host));
    for (const tae::v1::AgentFacts::Dir& dir : facts.dirs()) {
      group.checks.push_back(CheckDisk(dir, host));
    }
    group.checks.push_back(DescribeAccelerators(facts));
  }
  for (Check& check : CheckAcceleratorLabels(
           std::map<std::string, std::string>(agent.labels().begin(), agent.labels().end()), facts,
           host)) {
    group.checks.push_back(std::move(check));
  }
  for (const std::string& problem : facts.problems()) {
    group.checks.push_back(Warn(problem, ""));
  }
  nlohmann::ordered_json labels = nlohmann::ordered_json::object();
  for (const auto& [key, value] : agent.labels()) {
    labels[key] = value;
  }
  group.detail = {{"id", agent.id()},
                  {"host", agent.host()},
                  {"state", tae::v1::StateName(agent.state())},
                  {"slots", agent.slots()},
                  {"labels", labels},
                  {"version", agent.version()},
                  {"facts", FactsJson(facts)}};
  return group;
}

int ExitCode(const std::vector<Group>& groups) {
  for (const Group& group : groups) {
    for (const Check& check : group.checks) {
      if (check.level == Level::kFail) {
        return 1;
      }
    }
  }
  return 0;
}

std::string RenderText(const std::vector<Group>& groups) {
  std::string out;
  int fails = 0;
  int warns = 0;
  for (const Group& group : groups) {
    absl::StrAppend(&out, group.name, "\n");
    for (const Check& check : group.checks) {
      absl::StrAppendFormat(&out, "  %-4s  %s\n", ToString(check.level), check.what);
      if (!check.fix.empty() && check.level != Level::kOk) {
        absl::StrAppend(&out, "        fix: ", check.fix, "\n");
      }
      fails += check.level == Level::kFail;
      warns += check.level == Level::kWarn;
    }
    absl::StrAppend(&out, "\n");
  }
  if (fails == 0 && warns == 0) {
    absl::StrAppend(&out, "no problems found\n");
  } else {
    absl::StrAppend(&out, fails, " failure(s), ", warns, " warning(s)\n");
  }
  return out;
}

nlohmann::ordered_json RenderJson(const std::vector<Group>& groups) {
  nlohmann::ordered_json out_groups = nlohmann::ordered_json::array();
  int fails = 0;
  int warns = 0;
  for (const Group& group : groups) {
    nlohmann::ordered_json checks = nlohmann::ordered_json::array();
    for (const Check& check : group.checks) {
      checks.push_back(
          {{"level", ToString(check.level)}, {"what", check.what}, {"fix", check.fix}});
      fails += check.level == Level::kFail;
      warns += check.level == Level::kWarn;
    }
    nlohmann::ordered_json g = {{"name", group.name}, {"checks", checks}};
    if (!group.detail.is_null()) {
      g["detail"] = group.detail;
    }
    out_groups.push_back(g);
  }
  return {{"ok", fails == 0}, {"failures", fails}, {"warnings", warns}, {"groups", out_groups}};
}

nlohmann::ordered_json FactsJson(const tae::v1::AgentFacts& facts) {
  nlohmann::ordered_json dirs = nlohmann::ordered_json::array();
  for (const tae::v1::AgentFacts::Dir& dir : facts.dirs()) {
    dirs.push_back({{"role", dir.role()},
                    {"path", dir.path()},
                    {"free_bytes", dir.free_bytes()},
                    {"total_bytes", dir.total_bytes()},
                    {"error", dir.error()}});
  }
  return {{"version", facts.version()},
          {"hostname", facts.hostname()},
          {"kernel", facts.kernel()},
          {"cpu_count", facts.cpu_count()},
          {"threads_per_run", facts.threads_per_run()},
          {"blas", facts.blas()},
          {"openblas_pthread", facts.openblas_pthread()},
          {"torch", facts.torch()},
          {"torch_engine",
           {{"python", facts.torch_engine().python()},
            {"python_version", facts.torch_engine().python_version()},
            {"torch", facts.torch_engine().torch()},
            {"torch_xla", facts.torch_engine().torch_xla()},
            {"device", facts.torch_engine().device()},
            {"error", facts.torch_engine().error()}}},
          {"dirs", dirs},
          {"accelerators",
           std::vector<std::string>(facts.accelerators().begin(), facts.accelerators().end())},
          {"problems", std::vector<std::string>(facts.problems().begin(), facts.problems().end())}};
}

}  // namespace tae::client::doctor
