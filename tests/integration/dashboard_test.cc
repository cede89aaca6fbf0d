// taed's dashboard through the real binaries: sign-in (no token, no data), the ablation table
// equal to `taectl report --json`, curves with their bands, exports, actions that need the CSRF
// token, and the live streams. The pages themselves are driven in a real browser by
// tests/web/dashboard_browser_test.py.

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "common/fs/fs.h"
#include "nlohmann/json.hpp"
#include "tests/integration/harness.h"
#include "tests/integration/http_client.h"

namespace tae::testing {
namespace {

constexpr const char* kStudy = R"(name = "dash"
[model]
layers = 1
d_model = 16
heads = 2
[train]
task = "copy"
vocab = 8
seq_len = 16
batch_size = 8
steps = 40
eval_every = 10
eval_batches = 2
warmup = 5
threads = 1
seeds = [0, 1]
[[ablation]]
name = "no-pos"
"model.pos_encoding" = "none"
)";

struct Dashboard {
  int port = 0;
  std::string token;
  std::string cookie;  // "tae_session=..."
  std::string csrf;
};

// Reads the port and token taed wrote, signs in like a browser, and gets the CSRF token.
Dashboard SignIn(const Cluster& cluster) {
  Dashboard d;
  absl::StatusOr<std::string> addr = fs::ReadFile(cluster.home() + "/http.addr");
  absl::StatusOr<std::string> token = fs::ReadFile(cluster.home() + "/http.token");
  REQUIRE(addr.ok());
  REQUIRE(token.ok());
  absl::string_view a = absl::StripAsciiWhitespace(*addr);
  REQUIRE(absl::ConsumePrefix(&a, "127.0.0.1:"));
  REQUIRE(absl::SimpleAtoi(a, &d.port));
  d.token = std::string(absl::StripAsciiWhitespace(*token));
  HttpReply in = Http(d.port, {"GET", "/?token=" + d.token});
  REQUIRE(in.status == 200);
  // Moves on to the page by itself, a same-origin navigation (a redirect would keep the first
  // hop's Sec-Fetch-Site).
  CHECK(absl::StrContains(in.body, "location.replace('/' + location.hash)"));
  const std::string set_cookie = in.headers["set-cookie"];
  CHECK(absl::StrContains(set_cookie, "HttpOnly"));
  CHECK(absl::StrContains(set_cookie, "SameSite=Strict"));
  d.cookie = set_cookie.substr(0, set_cookie.find(';'));
  HttpReply session = Http(d.port, {"GET", "/api/session", "", {{"Cookie", d.cookie}}});
  REQUIRE(session.status == 200);
  d.csrf = nlohmann::json::parse(session.body)["csrf"];
  return d;
}

nlohmann::json GetJson(const Dashboard& d, const std::string& target) {
  HttpReply r = Http(d.port, {"GET", target, "", {{"Cookie", d.cookie}}});
  INFO(target << " -> " << r.status << " " << r.body);
  REQUIRE(r.status == 200);
  return nlohmann::json::parse(r.body);
}

TEST_CASE("the dashboard gives nothing without its token, and its page only once signed in") {
  Cluster cluster(0, 1);
  absl::StatusOr<std::string> addr = fs::ReadFile(cluster.home() + "/http.addr");
  REQUIRE(addr.ok());
  int port = 0;
  absl::string_view a = absl::StripAsciiWhitespace(*addr);
  REQUIRE(absl::ConsumePrefix(&a, "127.0.0.1:"));
  REQUIRE(absl::SimpleAtoi(a, &port));

  HttpReply no_cookie = Http(port, {"GET", "/api/experiments"});
  CHECK(no_cookie.status == 401);
  CHECK(absl::StrContains(no_cookie.body, "taectl ui"));
  CHECK(Http(port, {"GET", "/"}).status == 401);
  CHECK(Http(port, {"GET", "/?token=not-the-token"}).status == 401);
  CHECK(Http(port, {"GET", "/api/experiments", "", {{"Cookie", "tae_session=guess"}}}).status ==
        401);
  CHECK(Http(port, {"GET", "/api/events"}).status == 401);

  Dashboard d = SignIn(cluster);
  // Each sign-in is a new random session (not derived from the token), and both work.
  Dashboard again = SignIn(cluster);
  CHECK(again.cookie != d.cookie);
  CHECK(again.csrf != d.csrf);
  CHECK(Http(port, {"GET", "/api/experiments", "", {{"Cookie", d.cookie}}}).status == 200);
  // What one signed-in browser sends is answered, whatever its path holds: GET /%FF (a path
  // that decodes to invalid UTF-8) used to stop taed.
  for (const char* target : {"/%FF", "/api/runs/%FF/logs/stream", "/api/%FF%FE", "/%C3%28?x=%FF"}) {
    INFO(target);
    HttpReply bad = Http(port, {"GET", target, "", {{"Cookie", d.cookie}}});
    CHECK(bad.status >= 400);
    CHECK(bad.status < 500);
  }
  CHECK(Http(port, {"GET", "/api/experiments", "", {{"Cookie", d.cookie}}}).status == 200);
  // A page on another local port (same-site to the browser) gets nothing, cookie or not.
  CHECK(
      Http(port,
           {"GET", "/api/experiments", "", {{"Cookie", d.cookie}, {"Sec-Fetch-Site", "same-site"}}})
          .status == 403);
  CHECK(Http(port, {"GET",
                    "/api/experiments",
                    "",
                    {{"Cookie", d.cookie}, {"Sec-Fetch-Site", "same-origin"}}})
            .status == 200);
  // A DNS-rebinding page sends its own host name: refused even with the cookie.
  CHECK(Http(port, {"GET",
                    "/api/experiments",
                    "evil.example:" + std::to_string(port),
                    {{"Cookie", d.cookie}}})
            .status == 421);
  HttpReply page = Http(port, {"GET", "/", "", {{"Cookie", d.cookie}}});
  REQUIRE(page.status == 200);
  CHECK(absl::StrContains(page.headers["content-type"], "text/html"));
  CHECK(absl::StrContains(page.headers["content-security-policy"], "default-src 'none'"));
  CHECK(absl::StrContains(page.body, "type=\"importmap\""));
  // Its modules are content-hashed and cacheable forever; the token never appears in the page.
  const size_t at = page.body.find("src=\"/assets/app.");
  REQUIRE(at != std::string::npos);
  const std::string app = page.body.substr(at + 5, page.body.find('"', at + 5) - at - 5);
  CHECK(Http(port, {"GET", "/assets/app.js", "", {{"Cookie", d.cookie}}}).status == 404);
  HttpReply js = Http(port, {"GET", app, "", {{"Cookie", d.cookie}}});
  CHECK(js.status == 200);
  CHECK(absl::StrContains(js.headers["cache-control"], "immutable"));
  CHECK_FALSE(absl::StrContains(page.body, d.token));

  CommandResult ui = cluster.Taectl({"ui"});
  CHECK(ui.exit_code == 0);
  CHECK(ui.out == "http://127.0.0.1:" + std::to_string(port) + "/?token=" + d.token + "\n");
  CommandResult ui_run = cluster.Taectl({"ui", "r7"});
  CHECK(absl::EndsWith(ui_run.out, "#/r/7\n"));

  // --open: the browser's command line (readable by anyone in /proc) never holds the token; it
  // opens a page only this user can read, which sends it on.
  TempDir bin;
  const std::string seen = bin.path() + "/argv";
  bin.Write("fake-browser",
            "#!/bin/sh\necho \"$@\" > " + seen + ".tmp && mv " + seen + ".tmp " + seen + "\n");
  std::filesystem::permissions(bin.path() + "/fake-browser", std::filesystem::perms::owner_all);
  const std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  setenv("PATH", (bin.path() + ":" + old_path).c_str(), 1);
  setenv("BROWSER", "fake-browser", 1);
  CommandResult opened = cluster.Taectl({"ui", "--open"});
  setenv("PATH", old_path.c_str(), 1);
  unsetenv("BROWSER");
  CHECK(opened.exit_code == 0);
  REQUIRE(WaitUntil([&] { return std::filesystem::exists(seen); }, 30));
  absl::StatusOr<std::string> argv = fs::ReadFile(seen);
  REQUIRE(argv.ok());
  CHECK(absl::StartsWith(*argv, "file://" + cluster.home() + "/ui-open.html"));
  CHECK_FALSE(absl::StrContains(*argv, d.token));
  absl::StatusOr<std::string> hop = fs::ReadFile(cluster.home() + "/ui-open.html");
  REQUIRE(hop.ok());
  CHECK(absl::StrContains(*hop, "/?token=" + d.token));
  CHECK((std::filesystem::status(cluster.home() + "/ui-open.html").permissions() &
         (std::filesystem::perms::group_all | std::filesystem::perms::others_all)) ==
        std::filesystem::perms::none);
}

TEST_CASE(
    "the dashboard's table is taectl report's, its curves have a band per variant, and "
    "actions need the CSRF token") {
  Cluster cluster(1, 2);
  TempDir dir;
  const std::string spec = dir.Write("dash.toml", kStudy);
  CommandResult submit = cluster.Taectl({"submit", spec, "--wait"}, 600);
  INFO(submit.out << submit.err);
  REQUIRE(submit.exit_code == 0);
  Dashboard d = SignIn(cluster);

  nlohmann::json cli = cluster.TaectlJson({"report", "dash"});
  nlohmann::json web = GetJson(d, "/api/experiments/dash/report");
  CHECK(web["rows"] == cli["rows"]);
  CHECK(web["metrics"] == cli["metrics"]);
  CHECK(web["goal"]["eval/loss"] == "min");
  CHECK(web["goal"]["eval/acc"] == "max");
  // The key that tells the variants apart, and only it.
  CHECK(web["varying"]["baseline"] == nlohmann::json{{"model.pos_encoding", "learned"}});
  CHECK(web["varying"]["no-pos"] == nlohmann::json{{"model.pos_encoding", "none"}});

  nlohmann::json exps = GetJson(d, "/api/experiments");
  REQUIRE(exps["experiments"].size() == 1);
  CHECK(exps["experiments"][0]["counts"]["succeeded"] == 4);

  nlohmann::json curves = GetJson(d, "/api/experiments/dash/curves?metric=eval%2Floss&width=400");
  CHECK(curves["metric"] == "eval/loss");
  CHECK(curves["x"] == nlohmann::json{10, 20, 30, 40});
  REQUIRE(curves["variants"].size() == 2);
  for (const nlohmann::json& band : curves["variants"]) {
    CHECK(band["n_max"] == 2);
    CHECK(band["runs"].size() == 2);
    CHECK(band["n"] == nlohmann::json{2, 2, 2, 2});
    for (size_t i = 0; i < 4; ++i) {
      CHECK(band["lo"][i].get<double>() <= band["mean"][i].get<double>());
      CHECK(band["min"][i].get<double>() <= band["mean"][i].get<double>());
    }
  }
  // The last point's mean is the report's mean of final values.
  for (const nlohmann::json& row : cli["rows"]) {
    for (const nlohmann::json& band : curves["variants"]) {
      if (band["variant"] == row["variant"]) {
        CHECK(band["mean"][3].get<double>() ==
              Approx(row["metrics"]["eval/loss"]["mean"].get<double>()));
      }
    }
  }
  // A zoom at full resolution: only the points in [x_min, x_max].
  nlohmann::json zoomed =
      GetJson(d, "/api/experiments/dash/curves?metric=eval%2Floss&x_min=15&x_max=30&smooth=0.5");
  CHECK(zoomed["x"] == nlohmann::json{20, 30});
  nlohmann::json smoothed =
      GetJson(d, "/api/experiments/dash/curves?metric=eval%2Floss&smooth=0.5");
  // Smoothing ran over the whole series: the zoomed values are the unzoomed ones at those x.
  CHECK(zoomed["variants"][0]["mean"][0] == smoothed["variants"][0]["mean"][1]);
  nlohmann::json delta =
      GetJson(d, "/api/experiments/dash/curves?metric=eval%2Floss&delta=1&variants=no-pos");
  REQUIRE(delta["variants"].size() == 1);
  CHECK(delta["variants"][0]["variant"] == "no-pos");

  HttpReply csv = Http(
      d.port,
      {"GET", "/api/experiments/dash/curves.csv?metric=eval%2Floss", "", {{"Cookie", d.cookie}}});
  CHECK(csv.status == 200);
  CHECK(absl::StartsWith(csv.body, "step,variant,n,mean,lo,hi,min,max\n10,baseline,2,"));
  // A metric name with CR/LF cannot add a header through the download's file name.
  HttpReply injected =
      Http(d.port, {"GET",
                    "/api/experiments/dash/curves.csv?metric=a%0D%0AX-Injected:%201",
                    "",
                    {{"Cookie", d.cookie}}});
  CHECK(injected.headers.count("x-injected") == 0);
  CHECK(injected.headers["content-disposition"] ==
        "attachment; filename=\"e1-a__X-Injected__1.csv\"");
  HttpReply svg = Http(
      d.port,
      {"GET", "/api/experiments/dash/curves.svg?metric=eval%2Floss", "", {{"Cookie", d.cookie}}});
  CHECK(svg.status == 200);
  CHECK(absl::StrContains(svg.body, "<svg"));
  CHECK(absl::StrContains(svg.body, "no-pos (n=2)"));

  HttpReply bad =
      Http(d.port, {"GET", "/api/experiments/dash/curves?x=epochs", "", {{"Cookie", d.cookie}}});
  CHECK(bad.status == 400);
  CHECK(absl::StrContains(bad.body, "x: 'epochs' is not one of step, tokens, wall, rel"));
  CHECK(Http(d.port, {"GET", "/api/experiments/nope/report", "", {{"Cookie", d.cookie}}}).status ==
        404);

  // An action without the CSRF token changes nothing.
  HttpReply forged =
      Http(d.port, {"POST", "/api/experiments/dash/pause", "", {{"Cookie", d.cookie}}});
  CHECK(forged.status == 403);
  CHECK(GetJson(d, "/api/experiments/dash")["paused"] == false);
  HttpReply cross =
      Http(d.port,
           {"POST",
            "/api/experiments/dash/pause",
            "",
            {{"Cookie", d.cookie}, {"X-CSRF-Token", d.csrf}, {"Origin", "http://evil.example"}}});
  CHECK(cross.status == 403);
  HttpReply pause = Http(d.port, {"POST",
                                  "/api/experiments/dash/pause",
                                  "",
                                  {{"Cookie", d.cookie}, {"X-CSRF-Token", d.csrf}}});
  CHECK(pause.status == 200);
  CHECK(GetJson(d, "/api/experiments/dash")["paused"] == true);
  CHECK(cluster.TaectlJson({"show", "dash"})["paused"] == true);

  // A run: its transitions, summaries and log, and the log's stream ends with the run.
  nlohmann::json detail = GetJson(d, "/api/runs/1");
  CHECK(detail["state"] == "succeeded");
  CHECK(detail["transitions"].size() >= 3);
  nlohmann::json logs = GetJson(d, "/api/runs/1/logs?limit=10000");
  REQUIRE(logs["lines"].size() >= 4);
  const nlohmann::json& all = logs["lines"];
  // The tail first, then the page before it: together the log's end, in order.
  nlohmann::json tail = GetJson(d, "/api/runs/1/logs?tail=2");
  REQUIRE(tail["lines"].size() == 2);
  CHECK(tail["lines"][1] == all[all.size() - 1]);
  CHECK(tail["lines"][0] == all[all.size() - 2]);
  CHECK(tail["next"] == all[all.size() - 1]["cursor"]);
  CHECK(tail["finished"] == true);
  nlohmann::json before =
      GetJson(d, "/api/runs/1/logs?before=" + tail["lines"][0]["cursor"].dump() + "&limit=2");
  REQUIRE(before["lines"].size() == 2);
  CHECK(before["lines"][1] == all[all.size() - 3]);
  CHECK(
      Http(d.port, {"GET", "/api/runs/1/logs?tail=2&after=3", "", {{"Cookie", d.cookie}}}).status ==
      400);
  const std::string stream = ReadEvents(
      d.port, "/api/runs/1/logs/stream?after=0", d.cookie,
      [](const std::string& got) { return absl::StrContains(got, "event: end"); }, 10);
  CHECK(absl::StrContains(stream, "event: lines"));
  CHECK(absl::StrContains(stream, "event: end"));
  nlohmann::json series = GetJson(d, "/api/runs/1/series?metric=train%2Floss&width=100");
  int64_t stored = -1;
  for (const nlohmann::json& s : detail["summaries"]) {
    if (s["key"] == "train/loss") {
      stored = s["count"];
    }
  }
  CHECK(static_cast<int64_t>(series["x"].size()) == stored);
  CHECK(series["x"].back() == 40);
}

TEST_CASE("taed refuses a dashboard address beyond loopback before it touches its data dir") {
  TempDir dir;
  const std::string home = dir.path() + "/home";
  CommandResult r =
      RunCommand({BinPath("taed"), "--home", home, "--agents", "0", "--http", "0.0.0.0:8750"}, 30);
  CHECK(r.exit_code != 0);
  CHECK(absl::StrContains(r.err + r.out,
                          "--http 0.0.0.0:8750: the dashboard listens on loopback only"));
  CHECK_FALSE(std::filesystem::exists(home));
}

TEST_CASE("the dashboard's streams say when an experiment changes") {
  Cluster cluster(1, 2);
  Dashboard d = SignIn(cluster);
  TempDir dir;
  const std::string spec = dir.Write("dash.toml", kStudy);
  REQUIRE(cluster.Taectl({"submit", spec}).exit_code == 0);
  // The runs start, log and finish after the stream opened: it must say so.
  const std::string events = ReadEvents(
      d.port, "/api/experiments/dash/events", d.cookie,
      [](const std::string& got) { return absl::StrContains(got, "event: changed"); }, 60);
  CHECK(absl::StrContains(events, "event: changed"));
  CHECK(absl::StrContains(events, "\"experiment\":1"));
  const std::string global = ReadEvents(
      d.port, "/api/events", d.cookie,
      [](const std::string& got) { return absl::StrContains(got, "event: changed"); }, 60);
  CHECK(absl::StrContains(global, "event: changed"));
}

}  // namespace
}  // namespace tae::testing

namespace tae::testing {

TEST_CASE("runs come a page at a time in taectl runs and the dashboard, each page in id order") {
  Cluster cluster(0, 1);  // no agent: every run stays queued
  const std::string spec = cluster.dir().Write(
      "paged.toml",
      "name = \"paged\"\n[train]\nseeds = [0, 1, 2, 3, 4, 5, 6]\n[job]\ncommand = \"true\"\n");
  const std::string exp =
      std::to_string(cluster.TaectlJson({"submit", spec}).at("experiment").get<int64_t>());
  nlohmann::json all = cluster.TaectlJson({"runs", exp});  // --json: every run unless paged
  REQUIRE(all.size() == 7);
  std::vector<int64_t> ids;
  for (const auto& run : all) {
    ids.push_back(run.at("id").get<int64_t>());
  }
  REQUIRE(std::is_sorted(ids.begin(), ids.end()));
  nlohmann::json first = cluster.TaectlJson({"runs", exp, "--limit", "3"});
  REQUIRE(first.size() == 3);
  CHECK(first[2].at("id") == ids[2]);
  nlohmann::json second =
      cluster.TaectlJson({"runs", exp, "--limit", "3", "--after", absl::StrCat("r", ids[2])});
  REQUIRE(second.size() == 3);
  CHECK(second[0].at("id") == ids[3]);
  CHECK(cluster.TaectlJson({"runs", exp, "--after", std::to_string(ids[5])}).size() == 1);
  // The table says how to get the next page.
  CommandResult table = cluster.Taectl({"runs", exp, "--limit", "3"});
  REQUIRE(table.exit_code == 0);
  CHECK(absl::StrContains(table.out, absl::StrCat("3 of 7 runs shown; next page: taectl runs ", exp,
                                                  " --after ", ids[2])));
  CHECK(cluster.Taectl({"runs", exp, "--after", "rx"}).exit_code == 2);

  Dashboard d = SignIn(cluster);
  nlohmann::json page = GetJson(d, absl::StrCat("/api/experiments/", exp, "/runs?limit=4"));
  CHECK(page.at("runs").size() == 4);
  CHECK(page.at("total") == 7);
  CHECK(page.at("next_after") == ids[3]);
  nlohmann::json last =
      GetJson(d, absl::StrCat("/api/experiments/", exp, "/runs?limit=4&after=", ids[3]));
  CHECK(last.at("runs").size() == 3);
  CHECK(last.at("next_after") == 0);
  CHECK(GetJson(d, absl::StrCat("/api/experiments/", exp, "/runs")).at("runs").size() == 7);
  // A page asked again answers from the cache only while nothing was stored: a run cancelled
  // since shows as cancelled, in both forms.
  for (const char* form : {"rows", "columns"}) {
    GetJson(d, absl::StrCat("/api/experiments/", exp, "/runs?limit=4&form=", form));
  }
  REQUIRE(cluster.Taectl({"cancel", absl::StrCat("r", ids[0])}).exit_code == 0);
  CHECK(GetJson(d, absl::StrCat("/api/experiments/", exp, "/runs?limit=4&form=rows"))
            .at("runs")[0]
            .at("state") == "cancelled");
  CHECK(GetJson(d, absl::StrCat("/api/experiments/", exp, "/runs?limit=4&form=columns"))
            .at("columns")
            .at("state")[0] == "cancelled");
  for (const char* bad : {"limit=-1", "limit=x", "after=%FF", "limit=99999999999999999999"}) {
    INFO(bad);
    CHECK(Http(d.port, {"GET",
                        absl::StrCat("/api/experiments/", exp, "/runs?", bad),
                        "",
                        {{"Cookie", d.cookie}}})
              .status == 400);
  }
}

}  // namespace tae::testing
