// taectl ui: the dashboard's sign-in URL.

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "client/commands/commands.h"
#include "client/commands/common.h"
#include "client/rpc/control_client.h"
#include "common/fs/fs.h"
#include "common/process/spawn.h"
#include "common/process/tool.h"
#include "nlohmann/json.hpp"

namespace tae::client {
namespace {

// The dashboard's hash route for an experiment ("e12", "12", a name) or a run ("r7").
std::string RouteOf(const std::string& target) {
  if (target.empty()) {
    return "";
  }
  if (target[0] == 'r' && target.size() > 1 &&
      target.find_first_not_of("0123456789", 1) == std::string::npos) {
    return absl::StrCat("#/r/", target.substr(1));
  }
  absl::string_view id = target;
  if (id[0] == 'e' && id.size() > 1 && id.find_first_not_of("0123456789", 1) == std::string::npos) {
    id.remove_prefix(1);
  }
  return absl::StrCat("#/e/", id);
}

}  // namespace

int Ui(const CommandEnv& env, const Args& args) {
  bool open = false;
  bool json = false;
  cli::FlagSet flags(
      "usage: taectl ui [EXPERIMENT | rID] [--open] [--json]\n\n"
      "Prints the URL of the web dashboard taed serves on loopback (the ablation table, live\n"
      "curves, logs and the fleet; docs/dashboard.md). The URL carries the sign-in token from\n"
      "$TAE_HOME/http.token: opening it once sets a cookie in that browser. Keep it private;\n"
      "anyone with it can cancel your runs. From another machine: ssh -L PORT:127.0.0.1:PORT.");
  flags.Bool("open", &open, "open it in the browser (xdg-open, or $BROWSER)");
  flags.Bool("json", &json, "print {\"url\", \"address\"}");
  Args rest;
  if (int code = ParseOrExit(flags, args, 0, 1, &rest); code >= 0) {
    return code;
  }
  ControlClient client(env.home);
  if (!client.Ping()) {
    return Fail(absl::UnavailableError(
        absl::StrCat("taed is not running on ", env.home, ": start it with `taectl up`")));
  }
  absl::StatusOr<std::string> address = fs::ReadFile(env.home + "/http.addr");
  absl::StatusOr<std::string> token = fs::ReadFile(env.home + "/http.token");
  if (!address.ok() || !token.ok()) {
    return Fail(absl::FailedPreconditionError(
        absl::StrCat("taed runs without its dashboard (no ", env.home,
                     "/http.addr): it was started with --http off, or is older than this taectl")));
  }
  const std::string addr(absl::StripAsciiWhitespace(*address));
  const std::string url =
      absl::StrCat("http://", addr, "/?token=", absl::StripAsciiWhitespace(*token),
                   RouteOf(rest.empty() ? "" : rest[0]));
  if (json) {
    std::printf("%s\n", nlohmann::json{{"url", url}, {"address", addr}}.dump(2).c_str());
  } else {
    std::printf("%s\n", url.c_str());
  }
  if (open) {
    std::string browser;
    if (const char* b = std::getenv("BROWSER"); b != nullptr && *b) {
      browser = process::FindOnPath(b);
    }
    if (browser.empty()) {
      browser = process::FindOnPath("xdg-open");
    }
    if (browser.empty()) {
      return Fail(absl::NotFoundError(
          "--open: no xdg-open on PATH and $BROWSER is not set: open the URL above yourself"));
    }
    // The token never goes on the browser's command line (any local user can read that in
    // /proc): the browser opens a page only this user can read, which sends it on.
    const std::string page = env.home + "/ui-open.html";
    absl::Status written = fs::WriteFileAtomically(
        page,
        absl::StrCat("<!doctype html><meta charset=utf-8><meta name=referrer content=no-referrer>"
                     "<meta http-equiv=refresh content=\"0;url=",
                     absl::StrReplaceAll(url, {{"&", "&amp;"}, {"\"", "%22"}, {"<", "%3C"}}),
                     "\"><title>TAE</title>Opening the dashboard...\n"));
    if (!written.ok()) {
      return Fail(written);
    }
    process::SpawnRequest request;
    request.argv = {browser, "file://" + page};
    request.log_path = "/dev/null";
    absl::StatusOr<process::SpawnedProcess> child = process::Spawn(request);
    if (!child.ok()) {
      return Fail(child.status());
    }
  }
  return 0;
}

}  // namespace tae::client
