#include "server/provider/tpu_pools.h"

#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spec/spec.h"
#include "server/provider/config_file.h"
#include "toml++/toml.h"

namespace tae::provider {
namespace {

// A pool name becomes part of VM names: lowercase letters, digits and '-', starting with a letter.
bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 40 || !absl::ascii_islower(name[0])) {
    return false;
  }
  for (char c : name) {
    if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '-') {
      return false;
    }
  }
  return true;
}

// gcloud's duration syntax as far as taed accepts it: digits then s, m, h or d (e.g. "6h").
bool DurationText(const std::string& text) {
  if (text.size() < 2 || !absl::StrContains("smhd", text.back())) {
    return false;
  }
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    if (!absl::ascii_isdigit(text[i])) {
      return false;
    }
  }
  return true;
}

void AddProject(const TpuPool& pool, std::vector<std::string>* args) {
  if (!pool.project.empty()) {
    args->insert(args->end(), {"--project", pool.project});
  }
}

}  // namespace

absl::StatusOr<std::vector<TpuPool>> ParseTpuPools(const std::string& text, const std::string& path,
                                                   const std::string& default_agent) {
  absl::StatusOr<toml::table> parsed = ParseConfigToml(text, path);
  if (!parsed.ok()) {
    return parsed.status();
  }
  const toml::table& root = *parsed;
  std::vector<TpuPool> pools;
  std::set<std::string> names;
  absl::StatusOr<std::vector<const toml::table*>> tables = PoolTables(root, path);
  if (!tables.ok()) {
    return tables.status();
  }
  for (const toml::table* table : *tables) {
    const toml::node& item = *table;
    TpuPool pool;
    pool.agent = default_agent;
    for (auto&& [field_key, field_value] : *table) {
      const std::string field(field_key.str());
      // A reference of its own: lambdas cannot capture a structured binding in C++17 (clang).
      const toml::node& value = field_value;
      absl::Status status;
      auto string_of = [&](std::string* out) { return ConfigString(path, field, value, out); };
      auto bool_of = [&](bool* out) { return ConfigBool(path, field, value, out); };
      auto int_of = [&](int* out, int low, int high) {
        return ConfigInt(path, field, value, low, high, out);
      };
      if (field == "name") {
        status = string_of(&pool.name);
        if (status.ok() && !ValidName(pool.name)) {
          status =
              ConfigError(path, value,
                          "name: lowercase letters, digits and '-', starting with a letter, at "
                          "most 40");
        }
      } else if (field == "accelerator_type") {
        status = string_of(&pool.accelerator_type);
      } else if (field == "runtime_version") {
        status = string_of(&pool.runtime_version);
      } else if (field == "project") {
        status = string_of(&pool.project);
      } else if (field == "spot") {
        status = bool_of(&pool.spot);
      } else if (field == "preemptible") {
        status = bool_of(&pool.preemptible);
      } else if (field == "max_vms") {
        status = int_of(&pool.max_vms, 1, 1000);
      } else if (field == "slots") {
        status = int_of(&pool.slots, 1, 4096);
      } else if (field == "tunnel_port") {
        status = int_of(&pool.tunnel_port, 1, 65535);
      } else if (field == "queued") {
        status = bool_of(&pool.queued);
      } else if (field == "internal_ip") {
        status = bool_of(&pool.internal_ip);
      } else if (field == "valid_until") {
        status = string_of(&pool.valid_until);
        if (status.ok() && !DurationText(pool.valid_until)) {
          status = ConfigError(path, value,
                               "valid_until: expected a duration like \"30m\", \"6h\" or \"2d\"");
        }
      } else if (field == "agent" || field == "image" || field == "work_dir" ||
                 field == "ssh_user") {
        std::string* out = field == "agent"      ? &pool.agent
                           : field == "image"    ? &pool.image
                           : field == "work_dir" ? &pool.work_dir
                                                 : &pool.ssh_user;
        status = string_of(out);
        if (status.ok() && (!PlainText(*out) || out->front() == '-' ||
                            out->find_first_of(" '\"\\$`") != std::string::npos)) {
          status = ConfigError(
              path, value,
              absl::StrCat(field, ": no spaces, quotes, '$', '`', ',', '=' or a leading '-'"));
        } else if (status.ok() && field == "work_dir" && !pool.work_dir.empty() &&
                   pool.work_dir.front() != '/') {
          status = ConfigError(path, value, "work_dir: expected an absolute path");
        }
      } else if (field == "idle_timeout_s") {
        status = ConfigSeconds(path, field, value, 7 * 86400, &pool.idle_timeout_s);
      } else if (field == "zones") {
        const toml::array* zones = value.as_array();
        if (zones == nullptr || zones->empty()) {
          status = ConfigError(path, value, "zones: expected a non-empty array of zone names");
        }
        for (size_t i = 0; status.ok() && zones != nullptr && i < zones->size(); ++i) {
          const toml::value<std::string>* zone = (*zones)[i].as_string();
          if (zone == nullptr || !PlainText(zone->get())) {
            status =
                ConfigError(path, (*zones)[i], "zones: expected zone names like us-central2-b");
          } else {
            pool.zones.push_back(zone->get());
          }
        }
      } else if (field == "labels") {
        status = ConfigLabels(path, value, &pool.labels);
      } else {
        status = ConfigError(path, value, absl::StrCat("unknown key '", field, "' in [[pool]]"));
      }
      if (!status.ok()) {
        return status;
      }
    }
    if (pool.name.empty() || pool.accelerator_type.empty() || pool.zones.empty()) {
      return ConfigError(path, item, "[[pool]]: name, accelerator_type and zones are required");
    }
    if (!pool.image.empty() && table->get("agent") == nullptr) {
      pool.agent = "/opt/tae/bin/tae-agent";  // deploy/docker/Dockerfile's layout
    }
    if (pool.queued && pool.preemptible) {
      return ConfigError(path, item,
                         "[[pool]]: queued resources take spot = true, not preemptible");
    }
    if (!pool.valid_until.empty() && !pool.queued) {
      return ConfigError(path, item, "[[pool]]: valid_until needs queued = true");
    }
    if (pool.spot && pool.preemptible) {
      return ConfigError(path, item, "[[pool]]: spot and preemptible exclude each other");
    }
    if (!names.insert(pool.name).second) {
      return ConfigError(path, item, absl::StrCat("pool '", pool.name, "' is defined twice"));
    }
    pool.labels["pool"] = pool.name;
    pools.push_back(std::move(pool));
  }
  return pools;
}

std::vector<std::string> TpuCreateArgs(const TpuPool& pool, const std::string& name,
                                       const std::string& zone) {
  std::vector<std::string> args = {"compute",
                                   "tpus",
                                   "tpu-vm",
                                   "create",
                                   name,
                                   "--zone",
                                   zone,
                                   "--accelerator-type",
                                   pool.accelerator_type,
                                   "--version",
                                   pool.runtime_version};
  if (pool.spot) {
    args.push_back("--spot");
  } else if (pool.preemptible) {
    args.push_back("--preemptible");
  }
  args.insert(args.end(), {"--labels", absl::StrCat("tae=1,tae-pool=", pool.name)});
  AddProject(pool, &args);
  return args;
}

std::vector<std::string> TpuListArgs(const TpuPool& pool, const std::string& zone) {
  std::vector<std::string> args = {
      "compute",      "tpus", "tpu-vm",   "list",
      "--zone",       zone,   "--filter", "labels.tae-pool=" + pool.name,
      "--format=json"};
  AddProject(pool, &args);
  return args;
}

std::vector<std::string> TpuDeleteArgs(const TpuPool& pool, const std::string& name,
                                       const std::string& zone) {
  std::vector<std::string> args = {"compute", "tpus",   "tpu-vm", "delete",
                                   name,      "--zone", zone,     "--quiet"};
  AddProject(pool, &args);
  return args;
}

std::vector<std::string> TpuGuestAttributesArgs(const TpuPool& pool, const std::string& name,
                                                const std::string& zone) {
  std::vector<std::string> args = {"compute", "tpus",   "tpu-vm", "get-guest-attributes",
                                   name,      "--zone", zone,     "--format=json"};
  AddProject(pool, &args);
  return args;
}

std::vector<std::string> TpuQueuedCreateArgs(const TpuPool& pool, const std::string& name,
                                             const std::string& zone) {
  std::vector<std::string> args = {"compute",
                                   "tpus",
                                   "queued-resources",
                                   "create",
                                   name,
                                   "--node-id",
                                   name,
                                   "--zone",
                                   zone,
                                   "--accelerator-type",
                                   pool.accelerator_type,
                                   "--runtime-version",
                                   pool.runtime_version};
  if (pool.spot) {
    args.push_back("--spot");
  }
  if (!pool.valid_until.empty()) {
    args.insert(args.end(), {"--valid-until-duration", pool.valid_until});
  }
  args.insert(args.end(), {"--labels", absl::StrCat("tae=1,tae-pool=", pool.name)});
  AddProject(pool, &args);
  return args;
}

std::vector<std::string> TpuQueuedListArgs(const TpuPool& pool, const std::string& zone) {
  std::vector<std::string> args = {"compute", "tpus", "queued-resources", "list",
                                   "--zone",  zone,   "--format=json"};
  AddProject(pool, &args);
  return args;
}

std::vector<std::string> TpuQueuedDeleteArgs(const TpuPool& pool, const std::string& name,
                                             const std::string& zone) {
  std::vector<std::string> args = {"compute", "tpus", "queued-resources", "delete", name,
                                   "--zone",  zone,   "--force",          "--quiet"};
  AddProject(pool, &args);
  return args;
}

std::string TpuAgentId(const TpuWorker& worker) {
  return absl::StrCat(worker.vm, "-w", worker.index);
}

std::map<std::string, std::string> TpuAgentLabels(const TpuPool& pool, const TpuWorker& worker) {
  std::map<std::string, std::string> labels = pool.labels;
  labels["provider"] = "gcloud-tpu";
  labels["slice"] = worker.vm;
  labels["worker"] = absl::StrCat(worker.index);
  labels["zone"] = worker.zone;
  if (!worker.ip.empty()) {
    labels["addr"] = worker.ip;
  }
  return labels;
}

std::string TpuAgentCommand(const TpuPool& pool, const TpuWorker& worker) {
  const std::string id = TpuAgentId(worker);
  const std::string work_dir = absl::StrCat(pool.work_dir, "/", id);
  std::vector<std::string> pairs;
  for (const auto& [key, value] : TpuAgentLabels(pool, worker)) {
    pairs.push_back(absl::StrCat(key, "=", value));
  }
  // In a container: the host's network (the tunnel's end is the host's loopback) and devices
  // (/dev/accel*, /dev/vfio), and the work dir kept on the host (as root: docker makes it).
  const std::string program =
      pool.image.empty()
          ? spec::ShellQuote(pool.agent)
          : absl::StrCat("sudo docker run --rm -i --network host --privileged --user root -v ",
                         spec::ShellQuote(pool.work_dir), ":", spec::ShellQuote(pool.work_dir),
                         " --entrypoint ", spec::ShellQuote(pool.agent), " ",
                         spec::ShellQuote(pool.image));
  return absl::StrCat("exec ", program, " --stdin --taed 127.0.0.1:", pool.tunnel_port, " --id ",
                      spec::ShellQuote(id), " --slots ", pool.slots, " --labels ",
                      spec::ShellQuote(absl::StrJoin(pairs, ",")), " --work-dir ",
                      spec::ShellQuote(work_dir));
}

std::vector<std::string> TpuSshArgs(const TpuPool& pool, const TpuWorker& worker,
                                    const std::string& tunnel_target) {
  std::vector<std::string> args = {
      "compute",
      "tpus",
      "tpu-vm",
      "ssh",
      pool.ssh_user.empty() ? worker.vm : absl::StrCat(pool.ssh_user, "@", worker.vm),
      "--zone",
      worker.zone,
      absl::StrCat("--worker=", worker.index)};
  AddProject(pool, &args);
  if (pool.internal_ip) {
    args.push_back("--internal-ip");
  }
  args.insert(
      args.end(),
      {"--strict-host-key-checking=yes", "--command", TpuAgentCommand(pool, worker), "--", "-R",
       absl::StrCat("127.0.0.1:", pool.tunnel_port, ":", tunnel_target), "-o",
       "ExitOnForwardFailure=yes", "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=3"});
  return args;
}

std::string TpuKnownHostsLine(const std::string& node_id, int worker, const std::string& key_type,
                              const std::string& key) {
  const std::string suffix = key.size() > 6 ? key.substr(key.size() - 6) : key;
  return absl::StrCat(
      absl::AsciiStrToLower(absl::StrCat("tpu.", node_id, "-", worker, "-", suffix)), " ", key_type,
      " ", key);
}

bool IsCapacityError(const std::string& text) {
  const std::string lower = absl::AsciiStrToLower(text);
  for (const char* sign : {"no more capacity", "resource_exhausted", "stockout",
                           "insufficient capacity", "\"code\": 8"}) {
    if (absl::StrContains(lower, sign)) {
      return true;
    }
  }
  return false;
}

}  // namespace tae::provider
