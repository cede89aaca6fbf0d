#include "server/provider/gke_pools.h"

#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/provider/config_file.h"
#include "toml++/toml.h"

namespace tae::provider {
namespace {

// A Kubernetes object name part (RFC 1123 label): lowercase letters, digits and '-', starting
// with a letter and ending with a letter or digit, at most `max` characters.
bool DnsLabel(const std::string& text, size_t max) {
  if (text.empty() || text.size() > max || !absl::ascii_islower(text.front()) ||
      text.back() == '-') {
    return false;
  }
  for (char c : text) {
    if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '-') {
      return false;
    }
  }
  return true;
}

// "4x4" or "2x2x4": the chips of the slice, or nullopt when it is not a topology.
std::optional<int> TopologyChips(const std::string& topology) {
  std::vector<std::string> dims = absl::StrSplit(topology, 'x');
  if (dims.size() < 2 || dims.size() > 3) {
    return std::nullopt;
  }
  int chips = 1;
  for (const std::string& dim : dims) {
    int n = 0;
    if (!absl::SimpleAtoi(dim, &n) || n < 1 || n > 64 || dim.front() == '+') {
      return std::nullopt;
    }
    chips *= n;
  }
  return chips;
}

// Text that goes into a pod's command line and manifests as it is.
bool Word(const std::string& text) {
  return PlainText(text) && text.front() != '-' &&
         text.find_first_of(" \t'\"\\$`;&|<>(){}") == std::string::npos;
}

}  // namespace

absl::StatusOr<std::vector<GkePool>> ParseGkePools(const std::string& text,
                                                   const std::string& path) {
  absl::StatusOr<toml::table> parsed = ParseConfigToml(text, path);
  if (!parsed.ok()) {
    return parsed.status();
  }
  std::vector<GkePool> pools;
  std::set<std::string> names;
  absl::StatusOr<std::vector<const toml::table*>> tables = PoolTables(*parsed, path);
  if (!tables.ok()) {
    return tables.status();
  }
  for (const toml::table* table : *tables) {
    const toml::node& item = *table;
    GkePool pool;
    for (auto&& [field_key, field_value] : *table) {
      const std::string field(field_key.str());
      const toml::node& value = field_value;
      absl::Status status;
      auto string_of = [&](std::string* out) { return ConfigString(path, field, value, out); };
      auto int_of = [&](int* out, int low, int high) {
        return ConfigInt(path, field, value, low, high, out);
      };
      auto check = [&](bool ok, const std::string& what) {
        if (status.ok() && !ok) {
          status = ConfigError(path, value, absl::StrCat(field, ": ", what));
        }
      };
      if (field == "name") {
        status = string_of(&pool.name);
        // tae-NAME-N and tae-NAME-N-wW must stay valid object and label names.
        check(DnsLabel(pool.name, 30),
              "lowercase letters, digits and '-', starting with a letter, at most 30");
      } else if (field == "namespace" || field == "local_queue" || field == "priority_class") {
        std::string* out = field == "namespace"     ? &pool.namespace_
                           : field == "local_queue" ? &pool.local_queue
                                                    : &pool.priority_class;
        status = string_of(out);
        check(DnsLabel(*out, 63), "a Kubernetes name: lowercase letters, digits and '-'");
      } else if (field == "context" || field == "tpu_type" || field == "image" || field == "taed" ||
                 field == "tls_secret") {
        std::string* out = field == "context"    ? &pool.context
                           : field == "tpu_type" ? &pool.tpu_type
                           : field == "image"    ? &pool.image
                           : field == "taed"     ? &pool.taed
                                                 : &pool.tls_secret;
        status = string_of(out);
        check(Word(*out), "no spaces, quotes, shell characters, ',' or '=', nor a leading '-'");
      } else if (field == "topology") {
        status = string_of(&pool.topology);
        check(TopologyChips(pool.topology).has_value(),
              "expected chips per dimension like \"4x4\" or \"2x2x4\"");
      } else if (field == "chips_per_host") {
        status = int_of(&pool.chips_per_host, 1, 8);
      } else if (field == "max_slices") {
        status = int_of(&pool.max_slices, 1, 1000);
      } else if (field == "slots") {
        status = int_of(&pool.slots, 1, 4096);
      } else if (field == "idle_timeout_s" || field == "start_timeout_s") {
        status =
            ConfigSeconds(path, field, value, 7 * 86400,
                          field == "idle_timeout_s" ? &pool.idle_timeout_s : &pool.start_timeout_s);
      } else if (field == "labels") {
        status = ConfigLabels(path, value, &pool.labels);
      } else {
        status = ConfigError(path, value, absl::StrCat("unknown key '", field, "' in [[pool]]"));
      }
      if (!status.ok()) {
        return status;
      }
    }
    if (pool.name.empty() || pool.local_queue.empty() || pool.tpu_type.empty() ||
        pool.topology.empty() || pool.image.empty() || pool.taed.empty()) {
      return ConfigError(path, item,
                         "[[pool]]: name, local_queue, tpu_type, topology, image and taed are "
                         "required");
    }
    const int chips = *TopologyChips(pool.topology);
    if (chips % pool.chips_per_host != 0) {
      return ConfigError(
          path, item,
          absl::StrCat("[[pool]]: topology ", pool.topology, " has ", chips,
                       " chips, not a multiple of chips_per_host ", pool.chips_per_host));
    }
    pool.hosts = chips / pool.chips_per_host;
    if (!names.insert(pool.name).second) {
      return ConfigError(path, item, absl::StrCat("pool '", pool.name, "' is defined twice"));
    }
    pool.labels["pool"] = pool.name;
    pools.push_back(std::move(pool));
  }
  return pools;
}

int SliceIndex(const GkePool& pool, const std::string& name) {
  const std::string prefix = absl::StrCat("tae-", pool.name, "-");
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size() ||
      name.find_first_not_of("0123456789", prefix.size()) != std::string::npos ||
      name.size() - prefix.size() > 6) {
    return 0;
  }
  int index = 0;
  // Exactly the name TAE gives: "tae-v5e-02" is not slice 2 (whose JobSet, Secret and agents'
  // labels are "tae-v5e-2").
  return absl::SimpleAtoi(name.substr(prefix.size()), &index) && index > 0 &&
                 SliceName(pool, index) == name
             ? index
             : 0;
}

std::string SliceName(const GkePool& pool, int index) {
  return absl::StrCat("tae-", pool.name, "-", index);
}

}  // namespace tae::provider
