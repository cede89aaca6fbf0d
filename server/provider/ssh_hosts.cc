#include "server/provider/ssh_hosts.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spec/spec.h"
#include "server/provider/config_file.h"
#include "toml++/toml.h"

namespace tae::provider {
absl::StatusOr<std::vector<SshHost>> ParseSshHosts(const std::string& text, const std::string& path,
                                                   const std::string& default_agent) {
  absl::StatusOr<toml::table> parsed = ParseConfigToml(text, path);
  if (!parsed.ok()) {
    return parsed.status();
  }
  const toml::table& root = *parsed;
  std::vector<SshHost> hosts;
  std::set<std::string> ids;
  for (auto&& [key, node] : root) {
    if (key.str() != "host") {
      return ConfigError(
          path, node,
          absl::StrCat("unknown key '", std::string(key.str()), "' (expected [[host]] tables)"));
    }
    const toml::array* array = node.as_array();
    if (array == nullptr) {
      return ConfigError(path, node, "host: expected [[host]] tables");
    }
    for (const toml::node& item : *array) {
      const toml::table* table = item.as_table();
      if (table == nullptr) {
        return ConfigError(path, item, "host: expected a table");
      }
      SshHost host;
      host.agent = default_agent;
      for (auto&& [field_key, field_value] : *table) {
        const std::string field(field_key.str());
        // A reference of its own: lambdas cannot capture a structured binding in C++17 (clang).
        const toml::node& value = field_value;
        auto string_of = [&](std::string* out) { return ConfigString(path, field, value, out); };
        auto int_of = [&](int* out, int low, int high) {
          return ConfigInt(path, field, value, low, high, out);
        };
        absl::Status status;
        if (field == "destination") {
          status = string_of(&host.destination);
          if (status.ok() && host.destination.front() == '-') {
            status = ConfigError(path, value, "destination: must not start with '-'");
          }
        } else if (field == "id") {
          status = string_of(&host.id);
        } else if (field == "port") {
          status = int_of(&host.port, 1, 65535);
        } else if (field == "identity") {
          status = string_of(&host.identity);
        } else if (field == "known_hosts") {
          status = string_of(&host.known_hosts);
        } else if (field == "slots") {
          status = int_of(&host.slots, 1, 4096);
        } else if (field == "tunnel_port") {
          status = int_of(&host.tunnel_port, 1, 65535);
        } else if (field == "agent") {
          status = string_of(&host.agent);
        } else if (field == "work_dir") {
          status = string_of(&host.work_dir);
        } else if (field == "labels") {
          status = ConfigLabels(path, value, &host.labels);
        } else if (field == "ssh_options") {
          const toml::array* options = value.as_array();
          if (options == nullptr) {
            status = ConfigError(path, value, "ssh_options: expected an array of strings");
          }
          for (size_t i = 0; status.ok() && options != nullptr && i < options->size(); ++i) {
            const toml::value<std::string>* option = (*options)[i].as_string();
            if (option == nullptr || option->get().find('=') == std::string::npos) {
              status =
                  ConfigError(path, (*options)[i], "ssh_options: expected \"Name=value\" strings");
            } else {
              host.ssh_options.push_back(option->get());
            }
          }
        } else {
          status = ConfigError(path, value, absl::StrCat("unknown key '", field, "' in [[host]]"));
        }
        if (!status.ok()) {
          return status;
        }
      }
      if (host.destination.empty()) {
        return ConfigError(path, item, "[[host]]: destination is required");
      }
      if (host.id.empty()) {
        host.id = host.destination.substr(host.destination.find('@') + 1);
      }
      if (!PlainText(host.id)) {
        return ConfigError(path, item,
                           absl::StrCat("id '", host.id, "': no ',', '=' or line breaks"));
      }
      if (!ids.insert(host.id).second) {
        return ConfigError(path, item, absl::StrCat("id '", host.id, "' is used by two hosts"));
      }
      host.labels["provider"] = "ssh";
      hosts.push_back(std::move(host));
    }
  }
  return hosts;
}

std::vector<std::string> SshArgv(const SshHost& host, const std::string& tunnel_target,
                                 const std::string& ssh_binary) {
  std::vector<std::string> argv = {ssh_binary, "-T",
                                   "-o",       "BatchMode=yes",
                                   "-o",       "StrictHostKeyChecking=yes",
                                   "-o",       "ExitOnForwardFailure=yes",
                                   "-o",       "ServerAliveInterval=5",
                                   "-o",       "ServerAliveCountMax=3",
                                   "-p",       absl::StrCat(host.port)};
  if (!host.identity.empty()) {
    argv.insert(argv.end(), {"-i", host.identity, "-o", "IdentitiesOnly=yes"});
  }
  if (!host.known_hosts.empty()) {
    argv.insert(argv.end(), {"-o", "UserKnownHostsFile=" + host.known_hosts});
  }
  for (const std::string& option : host.ssh_options) {
    argv.insert(argv.end(), {"-o", option});
  }
  argv.insert(argv.end(), {"-R", absl::StrCat("127.0.0.1:", host.tunnel_port, ":", tunnel_target),
                           "--", host.destination});
  std::vector<std::string> labels;
  for (const auto& [key, value] : host.labels) {
    labels.push_back(absl::StrCat(key, "=", value));
  }
  // One string: ssh hands it to the remote user's shell.
  argv.push_back(absl::StrCat("exec ", spec::ShellQuote(host.agent),
                              " --stdin --taed 127.0.0.1:", host.tunnel_port, " --id ",
                              spec::ShellQuote(host.id), " --slots ", host.slots, " --labels ",
                              spec::ShellQuote(absl::StrJoin(labels, ",")), " --work-dir ",
                              spec::ShellQuote(host.work_dir)));
  return argv;
}

}  // namespace tae::provider
