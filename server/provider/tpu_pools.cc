#include "server/provider/tpu_pools.h"

#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

void AddProject(const TpuPool& pool, std::vector<std::string>* args) {
  if (!pool.project.empty()) {
    args->insert(args->end(), {"--project", pool.project});
  }
}

}  // namespace

absl::StatusOr<std::vector<TpuPool>> ParseTpuPools(const std::string& text,
                                                   const std::string& path) {
  absl::StatusOr<toml::table> parsed = ParseConfigToml(text, path);
  if (!parsed.ok()) {
    return parsed.status();
  }
  const toml::table& root = *parsed;
  std::vector<TpuPool> pools;
  std::set<std::string> names;
  for (auto&& [key, node] : root) {
    const toml::array* array = node.as_array();
    if (key.str() != "pool" || array == nullptr) {
      return ConfigError(
          path, node,
          absl::StrCat("unknown key '", std::string(key.str()), "' (expected [[pool]] tables)"));
    }
    for (const toml::node& item : *array) {
      const toml::table* table = item.as_table();
      if (table == nullptr) {
        return ConfigError(path, item, "pool: expected a table");
      }
      TpuPool pool;
      for (auto&& [field_key, value] : *table) {
        const std::string field(field_key.str());
        absl::Status status;
        auto string_of = [&](std::string* out) {
          if (!value.is_string() || value.as_string()->get().empty()) {
            return ConfigError(path, value, absl::StrCat(field, ": expected a non-empty string"));
          }
          *out = value.as_string()->get();
          return absl::OkStatus();
        };
        auto bool_of = [&](bool* out) {
          if (!value.is_boolean()) {
            return ConfigError(path, value, absl::StrCat(field, ": expected true or false"));
          }
          *out = value.as_boolean()->get();
          return absl::OkStatus();
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
          const toml::value<int64_t>* number = value.as_integer();
          if (number == nullptr || number->get() < 1 || number->get() > 1000) {
            status = ConfigError(path, value, "max_vms: expected an integer in 1..1000");
          } else {
            pool.max_vms = static_cast<int>(number->get());
          }
        } else if (field == "idle_timeout_s") {
          std::optional<double> seconds = value.value<double>();
          if (!seconds || !(*seconds >= 0) || *seconds > 7 * 86400) {
            status = ConfigError(path, value, "idle_timeout_s: expected seconds in 0..604800");
          } else {
            pool.idle_timeout_s = *seconds;
          }
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
          const toml::table* labels = value.as_table();
          if (labels == nullptr) {
            status = ConfigError(path, value, "labels: expected a table of strings");
          } else {
            for (auto&& [name, label] : *labels) {
              const toml::value<std::string>* text_value = label.as_string();
              if (text_value == nullptr || !PlainText(std::string(name.str())) ||
                  !PlainText(text_value->get())) {
                status = ConfigError(
                    path, label,
                    absl::StrCat("labels.", std::string(name.str()),
                                 ": expected a string without ',', '=' or line breaks"));
                break;
              }
              pool.labels[std::string(name.str())] = text_value->get();
            }
          }
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
      if (pool.spot && pool.preemptible) {
        return ConfigError(path, item, "[[pool]]: spot and preemptible exclude each other");
      }
      if (!names.insert(pool.name).second) {
        return ConfigError(path, item, absl::StrCat("pool '", pool.name, "' is defined twice"));
      }
      pool.labels["pool"] = pool.name;
      pools.push_back(std::move(pool));
    }
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
