// taectl export EXP --bundle DIR: the experiment as files a notebook reads with no taed running
// (the `tae` Python library's tae.open_bundle(DIR); docs/python.md, "Offline"). Every file is
// what taed's HTTP API answers, as it answers it, so a bundle's frames are a connection's:
//   manifest.json   {"format": "tae-bundle-1", "version", "experiment", "name", "exported_at",
//                    "points", "history": {metric: file}, "curves": {metric: file}}
//   experiment.json GET /api/experiments/ID
//   runs.json       GET /api/experiments/ID/runs, every page, as one array
//   metrics.json    GET /api/experiments/ID/metrics
//   report.json     GET /api/experiments/ID/report; report.txt|.md|.tex|.csv its text renderings
//   report-scale.json, report-scale.txt   a [scale] ladder's fit (GET .../report?scale=1), when
//                   the experiment is a ladder and its first metric is a loss; the manifest's
//                   "scale" names the file, or "scale_missing" says why there is none
//   history/M.tcol  every point of metric M (GET .../history, all pages in one body,
//                   common/api/columns.h)
//   curves/M.json   GET .../curves?metric=M (the dashboard's bands at their defaults)
// Files are written atomically; the manifest last, so a bundle without one is incomplete.

#include "client/commands/bundle.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/rpc/dashboard_client.h"
#include "common/api/columns.h"
#include "common/fs/fs.h"
#include "common/status/macros.h"
#include "common/version/version.h"
#include "nlohmann/json.hpp"

namespace tae::client {
namespace {

using nlohmann::ordered_json;

// "train/loss" -> "train_loss" (file names of any metric, collisions told apart by an index).
std::string FileStem(const std::string& metric, std::map<std::string, int>* used) {
  std::string out;
  for (char c : metric) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.';
    out.push_back(safe ? c : '_');
  }
  if (out.empty() || out[0] == '.') {
    out.insert(out.begin(), '_');
  }
  out = out.substr(0, 100);
  const int n = (*used)[out]++;
  return n == 0 ? out : absl::StrCat(out, "-", n);
}

absl::Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return fs::ErrnoStatus(errno, "mkdir", path);
  }
  return absl::OkStatus();
}

absl::Status Write(const std::string& path, std::string_view content) {
  fs::WriteOptions options;
  options.mode = 0644;
  return fs::WriteFileAtomically(path, content, options);
}

absl::StatusOr<ordered_json> GetJson(const DashboardClient& http, const std::string& target) {
  absl::StatusOr<std::string> body = http.Get(target);
  if (!body.ok()) {
    return body.status();
  }
  ordered_json parsed = ordered_json::parse(*body, nullptr, false);
  if (parsed.is_discarded()) {
    return absl::InternalError(absl::StrCat(target, ": taed answered with something not JSON"));
  }
  return parsed;
}

std::string Escape(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '_' || c == '.' || c == '~';
    out += plain ? std::string(1, static_cast<char>(c)) : absl::StrFormat("%%%02X", c);
  }
  return out;
}

}  // namespace

absl::Status WriteBundle(const std::string& home, const std::string& experiment,
                         const std::string& dir, bool progress) {
  ASSIGN_OR_RETURN(DashboardClient http, DashboardClient::FromHome(home));
  ASSIGN_OR_RETURN(ordered_json exp, GetJson(http, "/api/experiments/" + Escape(experiment)));
  const std::string base = absl::StrCat("/api/experiments/", exp["id"].get<int64_t>());
  RETURN_IF_ERROR(MakeDir(dir));
  RETURN_IF_ERROR(MakeDir(dir + "/history"));
  RETURN_IF_ERROR(MakeDir(dir + "/curves"));
  RETURN_IF_ERROR(Write(dir + "/experiment.json", exp.dump(2)));
  ordered_json runs = ordered_json::array();
  for (int64_t after = 0;;) {
    ASSIGN_OR_RETURN(ordered_json page,
                     GetJson(http, absl::StrCat(base, "/runs?limit=2000&after=", after)));
    for (ordered_json& run : page["runs"]) {
      runs.push_back(std::move(run));
    }
    after = page.value("next_after", int64_t{0});
    if (after == 0) {
      break;
    }
  }
  RETURN_IF_ERROR(Write(dir + "/runs.json", runs.dump(1)));
  ASSIGN_OR_RETURN(ordered_json metrics, GetJson(http, base + "/metrics"));
  RETURN_IF_ERROR(Write(dir + "/metrics.json", metrics.dump(2)));
  ASSIGN_OR_RETURN(ordered_json report, GetJson(http, base + "/report"));
  RETURN_IF_ERROR(Write(dir + "/report.json", report.dump(2)));
  for (const auto& [format, file] :
       {std::pair{"table", "report.txt"}, std::pair{"md", "report.md"},
        std::pair{"latex", "report.tex"}, std::pair{"csv", "report.csv"}}) {
    ASSIGN_OR_RETURN(std::string text, http.Get(absl::StrCat(base, "/report.txt?format=", format)));
    RETURN_IF_ERROR(Write(absl::StrCat(dir, "/", file), text));
  }
  // A ladder's fit: its rows are named by rung ("baseline[rung=0]").
  ordered_json scale = nullptr;
  std::string scale_missing;
  bool ladder = false;
  for (const ordered_json& row : report.value("rows", ordered_json::array())) {
    ladder = ladder || row.value("variant", "").find("rung=") != std::string::npos;
  }
  if (ladder) {
    absl::StatusOr<ordered_json> fit = GetJson(http, base + "/report?scale=1");
    if (fit.ok()) {
      RETURN_IF_ERROR(Write(dir + "/report-scale.json", fit->dump(2)));
      ASSIGN_OR_RETURN(std::string text, http.Get(base + "/report.txt?scale=1"));
      RETURN_IF_ERROR(Write(dir + "/report-scale.txt", text));
      scale = "report-scale.json";
    } else {
      scale_missing = std::string(fit.status().message());
    }
  }
  ordered_json history = ordered_json::object();
  ordered_json curves = ordered_json::object();
  std::map<std::string, int> used;
  int64_t points = 0;
  const ordered_json& names = metrics["metrics"];
  int done = 0;
  for (const ordered_json& name : names) {
    const std::string metric = name.get<std::string>();
    const std::string stem = FileStem(metric, &used);
    // Every page of the metric into one body: the runs' entries and columns in order.
    api::PointColumns all;
    ordered_json entries = ordered_json::array();
    for (int64_t after = 0;;) {
      ASSIGN_OR_RETURN(
          std::string body,
          http.Get(absl::StrCat(base, "/history?metric=", Escape(metric), "&after=", after)));
      api::PointColumns page;
      ASSIGN_OR_RETURN(nlohmann::json header, api::DecodeColumns(body, &page));
      all.steps.insert(all.steps.end(), page.steps.begin(), page.steps.end());
      all.values.insert(all.values.end(), page.values.begin(), page.values.end());
      all.walls.insert(all.walls.end(), page.walls.begin(), page.walls.end());
      for (const nlohmann::json& entry : header["runs"]) {
        entries.push_back(ordered_json::parse(entry.dump()));
      }
      after = header.value("next_after", int64_t{0});
      if (after == 0) {
        break;
      }
    }
    points += static_cast<int64_t>(all.steps.size());
    const std::string history_file = absl::StrCat("history/", stem, ".tcol");
    RETURN_IF_ERROR(Write(absl::StrCat(dir, "/", history_file),
                          api::EncodeColumns(ordered_json{{"experiment", exp["id"]},
                                                          {"metric", metric},
                                                          {"runs", entries},
                                                          {"next_after", 0}},
                                             all)));
    history[metric] = history_file;
    ASSIGN_OR_RETURN(ordered_json band,
                     GetJson(http, absl::StrCat(base, "/curves?metric=", Escape(metric))));
    const std::string curves_file = absl::StrCat("curves/", stem, ".json");
    RETURN_IF_ERROR(Write(absl::StrCat(dir, "/", curves_file), band.dump()));
    curves[metric] = curves_file;
    ++done;
    if (progress) {
      std::fprintf(stderr, "\rbundle: %d/%zu metrics, %ld points", done, names.size(),
                   static_cast<long>(points));
    }
  }
  if (progress && done > 0) {
    std::fprintf(stderr, "\n");
  }
  ordered_json manifest = {{"format", "tae-bundle-1"},
                           {"version", version::Project()},
                           {"experiment", exp["id"]},
                           {"name", exp["name"]},
                           {"exported_at", static_cast<double>(std::time(nullptr))},
                           {"runs", runs.size()},
                           {"points", points},
                           {"history", history},
                           {"curves", curves}};
  if (!scale.is_null()) {
    manifest["scale"] = scale;
  } else if (!scale_missing.empty()) {
    manifest["scale_missing"] = scale_missing;
  }
  return Write(dir + "/manifest.json", manifest.dump(2));
}

}  // namespace tae::client
