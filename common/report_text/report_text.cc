#include "common/report_text/report_text.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/text/table.h"
#include "common/api/json.h"
#include "common/stats/stats.h"
#include "nlohmann/json.hpp"
#include "proto/tae/v1/states.h"

namespace tae::report_text {

using text::CsvField;
using text::FormatNumber;
using text::Table;

namespace {

std::string Num(double value) { return std::isnan(value) ? "-" : FormatNumber(value); }

// 3.26M, 20.8M, 1.2k: parameters, FLOPs and tokens/s at a glance.
std::string Compact(double value) {
  if (std::isnan(value)) {
    return "-";
  }
  const double mag = std::fabs(value);
  if (mag >= 1e9) {
    return absl::StrFormat("%.3gG", value / 1e9);
  }
  if (mag >= 1e6) {
    return absl::StrFormat("%.3gM", value / 1e6);
  }
  if (mag >= 1e3) {
    return absl::StrFormat("%.3gk", value / 1e3);
  }
  return absl::StrFormat("%.3g", value);
}

std::string MeanCi(const tae::v1::ReportCell& cell, const std::string& pm) {
  if (cell.diverged() > 0) {
    return absl::StrCat("diverged ", cell.diverged(), "/", cell.diverged() + cell.n(), " (step ",
                        cell.diverged_step(), ")");
  }
  if (cell.n() == 0) {
    return "-";
  }
  // A mean at chance, at a shortcut or below a floor says so: "0.311 ± 0.02 [shortcut]".
  const std::string level =
      cell.level_kind().empty() ? "" : absl::StrCat(" [", cell.level_kind(), "]");
  if (std::isnan(cell.ci95())) {
    return absl::StrCat(Num(cell.mean()), level);
  }
  return absl::StrCat(Num(cell.mean()), pm, Num(cell.ci95()), level);
}

// "+0.0123 [+0.0040, +0.0206] (+4.1%)": the delta, its interval (consistent with the verdict) and,
// against a baseline clearly away from zero, its relative size. Shown decided or not: an
// undecided delta with its interval is not "no effect".
std::string Delta(const tae::v1::ReportRow& row, const tae::v1::ReportCell& cell) {
  if (row.variant() == row.baseline() || !cell.has_delta()) {
    return "";
  }
  auto sign = [](double x) { return absl::StrCat(x >= 0 ? "+" : "", Num(x)); };
  std::string text = sign(cell.delta());
  if (tae::api::HasDeltaInterval(cell)) {
    absl::StrAppend(&text, " [", sign(cell.delta_lo()), ", ", sign(cell.delta_hi()), "]");
  }
  if (!std::isnan(cell.rel_delta())) {
    absl::StrAppend(&text, absl::StrFormat(" (%+.1f%%)", 100.0 * cell.rel_delta()));
  }
  return text;
}

// The verdict column: "different ***", "undecided (n=3, held: r12 failed; detects |Δ|≥0.41)",
// "equivalent within ±0.01 (n=5)", "no verdict (optimistic: chosen on these seeds)".
std::string Verdict(const tae::v1::ReportRow& row, const tae::v1::ReportCell& cell) {
  if (row.variant() == row.baseline() || !cell.has_delta()) {
    return "";
  }
  const std::string held =
      cell.decision_held().empty() ? "" : absl::StrCat(", held: ", cell.decision_held());
  if (cell.decision().empty()) {
    return cell.note().empty() ? "-" : absl::StrCat("no verdict (", cell.note(), ")");
  }
  if (cell.decision() == "different") {
    std::string text = absl::StrCat("different", cell.mark().empty() ? "" : " ", cell.mark());
    if (!cell.decision_held().empty()) {
      absl::StrAppend(&text, " (held: ", cell.decision_held(), ")");
    }
    return text;
  }
  if (cell.decision() == "equivalent") {
    return absl::StrFormat("equivalent within ±%g (n=%d)", cell.margin(), cell.decision_n());
  }
  std::string why;
  if (!cell.note().empty()) {
    why = absl::StrCat("; ", cell.note());
  } else if (tae::api::HasDetectable(cell)) {
    why = absl::StrCat("; detects |Δ|≥", Num(cell.detectable()));
  }
  return absl::StrCat("undecided (n=", cell.decision_n(), cell.decision_futile() ? ", futile" : "",
                      held, why, ")");
}

bool Tuned(const tae::v1::ReportResponse& report) { return report.view() == "tuned"; }

// "layers=2,lr=0.001" -> {{"layers", "2"}, {"lr", "0.001"}}.
std::vector<std::pair<std::string, std::string>> PointValues(const std::string& point) {
  std::vector<std::pair<std::string, std::string>> out;
  for (absl::string_view part : absl::StrSplit(point, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    out.push_back(std::move(kv));
  }
  return out;
}

// The tuned view's grid keys, in the order the rows' points name them first.
std::vector<std::string> GridKeys(const tae::v1::ReportResponse& report) {
  std::vector<std::string> keys;
  for (const tae::v1::ReportRow& row : report.rows()) {
    for (const auto& kv : PointValues(row.point())) {
      if (std::find(keys.begin(), keys.end(), kv.first) == keys.end()) {
        keys.push_back(kv.first);
      }
    }
  }
  return keys;
}

// The row's value of each grid key ("-" where it has no chosen point).
std::vector<std::string> KeyCells(const tae::v1::ReportRow& row,
                                  const std::vector<std::string>& keys) {
  const std::vector<std::pair<std::string, std::string>> values = PointValues(row.point());
  std::vector<std::string> cells;
  for (const std::string& key : keys) {
    auto it =
        std::find_if(values.begin(), values.end(), [&](const auto& kv) { return kv.first == key; });
    cells.push_back(it == values.end() ? "-" : it->second);
  }
  return cells;
}

std::vector<std::string> HumanHeader(const tae::v1::ReportResponse& report) {
  std::vector<std::string> header = {"variant"};
  if (Tuned(report)) {
    for (const std::string& key : GridKeys(report)) {
      header.push_back(key);
    }
    header.push_back("points");
  }
  header.push_back("runs");
  for (const std::string& m : report.metrics()) {
    header.push_back(m + " (±95% CI)");
    header.push_back("best (selected)");
    header.push_back("Δ " + m + " [CI]");
    header.push_back("verdict");
  }
  header.insert(header.end(), {"params", "FLOPs/tok", "tok/s"});
  return header;
}

std::vector<std::string> HumanRow(const tae::v1::ReportResponse& report,
                                  const tae::v1::ReportRow& row, const std::string& pm) {
  std::vector<std::string> cells = {row.variant()};
  if (Tuned(report)) {
    cells = {row.ablation()};
    for (std::string& value : KeyCells(row, GridKeys(report))) {
      cells.push_back(std::move(value));
    }
    cells.push_back(absl::StrCat(row.candidates(), "/", row.points()));
  }
  cells.push_back(
      absl::StrCat(row.runs(), "/", row.runs_total(),
                   row.runs_pruned() > 0 ? absl::StrCat(" (", row.runs_pruned(), " pruned)") : "",
                   row.runs_failed() > 0 ? absl::StrCat(" (", row.runs_failed(), " failed)") : ""));
  for (const tae::v1::ReportCell& cell : row.cells()) {
    cells.push_back(MeanCi(cell, pm));
    cells.push_back(cell.n() > 0 ? Num(cell.best()) : "-");
    cells.push_back(Delta(row, cell));
    cells.push_back(Verdict(row, cell));
  }
  cells.push_back(Compact(row.params()));
  cells.push_back(Compact(row.flops_per_token()));
  cells.push_back(Compact(row.tokens_per_s()));
  return cells;
}

std::string Legend(const tae::v1::ReportResponse& report) {
  const tae::v1::ReportCorrection& correction = report.correction();
  std::string legend = absl::StrCat(
      "Final values, mean over seeds ± 95% CI (t distribution); best: mean of each run's best "
      "value, selected on the same evaluation data (optimistic); Δ vs ",
      report.baseline(), Tuned(report) ? " at its own best grid point" : " at the same grid point",
      " with its interval.");
  if (!correction.family().empty()) {
    absl::StrAppend(&legend, " Verdicts control ", correction.family(), ".");
  }
  if (!report.adaptive() && correction.controlled()) {
    absl::StrAppend(&legend, " Marks on ", correction.method() == "holm" ? "Holm" : "Bonferroni",
                    "-adjusted p (Welch's t, calibrated df): * <0.05, ** <0.01, *** <0.001.");
  }
  if (Tuned(report)) {
    absl::StrAppend(&legend, " Each variant at its own best grid point on ", report.search_metric(),
                    report.search_goal() == "max" ? " (highest" : " (lowest",
                    " mean final value over seeds); points: those with a score of the variant's "
                    "points (pruned, failed and unfinished ones have none); --at-grid shows every "
                    "point.");
    const int confirm = report.search_confirm();
    if (confirm <= 0) {
      absl::StrAppend(&legend,
                      " Estimates optimistic: each point was chosen on the same seeds whose mean "
                      "it shows, so the mean and Δ lean toward luck (search.confirm = N re-runs "
                      "the chosen points on N fresh seeds).");
    } else if (absl::StartsWith(report.estimates(), "confirmed")) {
      absl::StrAppend(&legend, " Estimates confirmed: each row's runs, mean, CI and Δ are ",
                      confirm, " fresh seeds at its chosen point, not the seeds it was chosen on.");
    } else {
      absl::StrAppend(&legend, " Confirmation ", report.estimates(),
                      ": each row's runs, mean, CI and Δ will be its chosen point's ", confirm,
                      " fresh seeds alone, added once the search is over.");
    }
  }
  bool decided = false;
  bool marked = false;
  for (const tae::v1::ReportRow& row : report.rows()) {
    for (const tae::v1::ReportCell& cell : row.cells()) {
      decided = decided || !cell.decision().empty();
      marked = marked || !cell.level_kind().empty();
    }
  }
  if (decided) {
    absl::StrAppend(
        &legend, report.adaptive()
                     ? " Verdicts by the group-sequential test of adaptive seeds (train.seeds = "
                       "{ min, max }), intervals repeated CIs at the look it stopped at, no "
                       "p-value stars (not valid after looking); undecided (n=seeds per arm), "
                       "futile when it stopped before max because max seeds would very likely "
                       "not decide it either."
                     : " Undecided (n=seeds per arm) when the interval spans zero: detects |Δ|≥x "
                       "is the smallest effect it would find with 80% power, not a bound on the "
                       "effect.");
  }
  if (marked) {
    absl::StrAppend(&legend,
                    " [chance], [shortcut], [floor]: the mean is at that level within its CI "
                    "(docs/tasks.md).");
  }
  return legend;
}

// "! eval/acc: baseline is at ...", one line each, above the table.
std::string BannerLines(const tae::v1::ReportResponse& report) {
  std::string out;
  for (const std::string& banner : report.banners()) {
    absl::StrAppend(&out, "! ", banner, "\n");
  }
  return out.empty() ? out : absl::StrCat(out, "\n");
}

std::string CsvNum(double value) {
  return std::isnan(value) ? "" : absl::StrFormat("%.10g", value);
}

std::string LatexEscape(const std::string& text) {
  return absl::StrReplaceAll(text, {{"\\", "\\textbackslash{}"},
                                    {"_", "\\_"},
                                    {"%", "\\%"},
                                    {"&", "\\&"},
                                    {"#", "\\#"},
                                    {"$", "\\$"},
                                    {"{", "\\{"},
                                    {"}", "\\}"},
                                    {"~", "\\textasciitilde{}"},
                                    {"^", "\\textasciicircum{}"},
                                    {"±", "$\\pm$"},
                                    {"Δ", "$\\Delta$"}});
}

std::string Markdown(const std::vector<std::string>& header,
                     const std::vector<std::vector<std::string>>& rows) {
  auto line = [](const std::vector<std::string>& cells) {
    std::vector<std::string> escaped;
    for (const std::string& c : cells) {
      escaped.push_back(absl::StrReplaceAll(c, {{"|", "\\|"}, {"*", "\\*"}}));
    }
    return absl::StrCat("| ", absl::StrJoin(escaped, " | "), " |\n");
  };
  std::string out = line(header);
  std::vector<std::string> rule(header.size(), "---");
  for (size_t i = 1; i < rule.size(); ++i) {
    rule[i] = "---:";
  }
  out += line(rule);
  for (const auto& row : rows) {
    out += line(row);
  }
  return out;
}

std::string Latex(const std::vector<std::string>& header,
                  const std::vector<std::vector<std::string>>& rows) {
  std::string out =
      absl::StrCat("\\begin{tabular}{l", std::string(header.size() - 1, 'r'), "}\n\\toprule\n");
  auto line = [](const std::vector<std::string>& cells) {
    std::vector<std::string> escaped;
    for (const std::string& c : cells) {
      std::string e = LatexEscape(c);
      // Significance marks as superscripts.
      for (const char* mark : {" ***", " **", " *"}) {
        if (absl::EndsWith(e, mark)) {
          e = absl::StrCat(e.substr(0, e.size() - std::string(mark).size()), "$^{",
                           std::string(mark).substr(1), "}$");
          break;
        }
      }
      escaped.push_back(e);
    }
    return absl::StrCat(absl::StrJoin(escaped, " & "), " \\\\\n");
  };
  out += line(header) + "\\midrule\n";
  for (const auto& row : rows) {
    out += line(row);
  }
  return out + "\\bottomrule\n\\end{tabular}\n";
}

std::string ConfigValue(const nlohmann::json& config, const std::string& key) {
  auto it = config.find(key);
  if (it == config.end()) {
    return "?";
  }
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// The report's last lines for an asha [search]: SavingsText and a blank line; "" otherwise.
std::string SavingsFooter(const tae::v1::Experiment& exp) {
  if (!exp.has_search_savings()) {
    return "";
  }
  return absl::StrCat(SavingsText(exp.search_savings()), "\n");
}

}  // namespace

std::string SavingsText(const tae::v1::SearchSavings& savings) {
  std::string out;
  if (savings.steps_full() > 0) {
    out = absl::StrFormat(
        "search: %.0f%% of the full grid's steps (%d of %d; each run's last step over its "
        "train.steps)",
        100.0 * static_cast<double>(savings.steps_run()) /
            static_cast<double>(savings.steps_full()),
        savings.steps_run(), savings.steps_full());
  } else {
    out = "search: no run with train.steps";
  }
  if (savings.runs_without_steps() > 0) {
    absl::StrAppend(&out, "; ", savings.runs_without_steps(),
                    " run(s) without train.steps not counted");
  }
  absl::StrAppend(&out, "\n");
  if (savings.rungs().empty()) {
    return absl::StrCat(out, "pruned: no rung judged yet\n");
  }
  std::vector<std::string> rungs;
  for (const tae::v1::SearchRung& rung : savings.rungs()) {
    std::string text = absl::StrFormat("rung %d (step %d) %d of %d", rung.rung(), rung.step(),
                                       rung.pruned(), rung.judged());
    if (rung.nodata() > 0) {
      absl::StrAppend(&text, absl::StrFormat(" (%d without data)", rung.nodata()));
    }
    rungs.push_back(std::move(text));
  }
  return absl::StrCat(out, "pruned: ", absl::StrJoin(rungs, ", "), "; ", savings.points_pruned(),
                      " point(s) in all\n");
}

namespace {

// "params", "FLOPs/token", "tokens/s", with the metric each comes from.
std::pair<std::string, std::string> CostLabel(const std::string& axis) {
  if (axis == "flops") {
    return {"FLOPs/token", "model/flops_per_token"};
  }
  if (axis == "tokens_per_s") {
    return {"tokens/s", "perf/tokens_per_s"};
  }
  return {"params", "model/params"};
}

std::string ClearsText(const std::string& clears) {
  if (clears == "yes") {
    return "clears";
  }
  if (clears == "mean_only") {
    return "mean only (CI straddles)";
  }
  if (clears == "no_ci") {
    return "mean only (1 seed, no CI)";
  }
  if (clears == "no_value") {
    return "no value";
  }
  if (clears == "failed_seeds") {
    return "no (a seed failed)";
  }
  return "no";
}

std::string PointText(const tae::v1::FrontierPoint& p, const std::string& label,
                      const std::string& metric) {
  const std::string ci = std::isnan(p.ci95()) ? "" : absl::StrCat(" ± ", Num(p.ci95()));
  return absl::StrCat(p.variant(), " (", label, " ", Compact(p.cost()), "; ", metric, " ",
                      Num(p.mean()), ci, ")");
}

}  // namespace

std::string RenderFrontier(const tae::v1::ReportResponse& report) {
  const tae::v1::ReportFrontier& f = report.frontier();
  const auto [label, source] = CostLabel(f.cost());
  const bool faster = !f.lower_is_cheaper();
  const std::string bar =
      absl::StrCat(f.metric(), " ", f.op(), " ", absl::StrFormat("%g", f.value()));
  std::string out =
      absl::StrCat("e", report.experiment().id(), " ", report.experiment().name(), ": ", f.metric(),
                   " (", f.goal() == "max" ? "higher" : "lower", " is better) against ", label,
                   " (", faster ? "higher is faster, so cheaper" : "lower is cheaper", ")\n");
  if (report.view() == "tuned") {
    absl::StrAppend(&out, "each variant at its best grid point on ", report.search_metric(), " (",
                    report.search_goal(), ")\n");
  }
  absl::StrAppend(&out, "bar: ", bar, ", cleared when the whole 95% CI is ",
                  f.op()[0] == '>' ? "above" : "below", " it\n\n");
  Table table({"variant", label, absl::StrCat(f.metric(), " ± 95% CI"), "95% CI", "bar", "front"});
  std::vector<std::string> unknown;
  std::vector<std::string> unknown_clear;
  std::vector<std::string> mean_only;
  const tae::v1::FrontierPoint* cheapest = nullptr;
  for (const tae::v1::FrontierPoint& p : f.points()) {
    const bool known = !std::isnan(p.cost());
    if (!known) {
      unknown.push_back(p.variant());
      if (p.clears() == "yes") {
        unknown_clear.push_back(p.variant());
      }
    } else if (p.clears() == "mean_only" || p.clears() == "no_ci") {
      mean_only.push_back(p.variant());
    }
    if (p.variant() == f.cheapest()) {
      cheapest = &p;
    }
    const std::string mean =
        p.n() == 0 ? "-"
                   : absl::StrCat(Num(p.mean()),
                                  std::isnan(p.ci95()) ? "" : absl::StrCat(" ± ", Num(p.ci95())));
    const std::string ci =
        std::isnan(p.ci95()) ? "-" : absl::StrCat("[", Num(p.lo()), ", ", Num(p.hi()), "]");
    std::string clears = ClearsText(p.clears());
    if (f.estimates() == "optimistic" && p.clears() == "yes") {
      clears = "optimistic CI clears";
    } else if (known && p.clears() == "yes" && !p.reached()) {
      clears = "CI clears, untested (the sequence stopped above)";
    }
    table.Add({p.variant(), known ? Compact(p.cost()) : "unknown", mean, ci, clears,
               p.on_front() ? "*" : ""});
  }
  absl::StrAppend(&out, table.Render(), "\n");
  const std::string which = faster ? "fastest" : "cheapest";
  if (cheapest != nullptr) {
    absl::StrAppend(&out, which, " that clears ", bar, ": ",
                    PointText(*cheapest, label, f.metric()), "\n");
  } else if (f.estimates() == "optimistic") {
    absl::StrAppend(&out,
                    "none named: the estimates are optimistic (each variant's point was "
                    "chosen on the same seeds); search.confirm = N re-runs the chosen "
                    "points on N fresh seeds, or --at-grid shows every point as run\n");
  } else {
    absl::StrAppend(&out, "none clears ", bar, " in the sequence from the most expensive down");
    if (!mean_only.empty()) {
      absl::StrAppend(&out, "; only the mean of ", absl::StrJoin(mean_only, ", "),
                      " does (more seeds may tell)");
    }
    absl::StrAppend(&out, "\n");
  }
  if (!unknown.empty()) {
    absl::StrAppend(&out, "cost unknown (their runs report no ", source,
                    "): ", absl::StrJoin(unknown, ", "), "\n");
  }
  if (!unknown_clear.empty()) {
    absl::StrAppend(&out, "these clear it but cannot be ranked by cost: ",
                    absl::StrJoin(unknown_clear, ", "), "\n");
  }
  absl::StrAppend(&out, "the ", which,
                  " that clears is found by a fixed sequence from the most expensive down, "
                  "stopping at the first that does not clear: the chance of naming one that does "
                  "not clear is at most 2.5%; estimates: ",
                  f.estimates().empty() ? "as run" : f.estimates(), "\n");
  absl::StrAppend(&out, "* on the Pareto front: no other variant of known cost is at least as ",
                  faster ? "fast" : "cheap", " and as good, and better in one\n");
  return out;
}

absl::StatusOr<std::string> RenderReport(const tae::v1::ReportResponse& report,
                                         const std::string& format) {
  if (format == "csv") {
    const bool tuned = Tuned(report);
    const std::vector<std::string> keys = tuned ? GridKeys(report) : std::vector<std::string>{};
    std::vector<std::string> header = {"variant"};
    if (tuned) {
      header.push_back("point");
      header.insert(header.end(), keys.begin(), keys.end());
      header.insert(header.end(), {"points", "candidates"});
    }
    header.insert(header.end(), {"baseline", "runs", "runs_total"});
    for (const std::string& m : report.metrics()) {
      for (const char* field :
           {"n", "mean", "ci95", "std", "best", "delta", "rel_delta", "p_value", "decision",
            "decision_n", "level", "p_adjusted", "delta_lo", "delta_hi"}) {
        header.push_back(absl::StrCat(m, ":", field));
      }
    }
    header.insert(header.end(), {"params", "flops_per_token", "tokens_per_s"});
    std::vector<std::string> fields;
    for (const std::string& h : header) {
      fields.push_back(CsvField(h));
    }
    std::string out = absl::StrCat(absl::StrJoin(fields, ","), "\n");
    for (const tae::v1::ReportRow& row : report.rows()) {
      std::vector<std::string> cells = {CsvField(tuned ? row.ablation() : row.variant())};
      if (tuned) {
        cells.push_back(CsvField(row.point()));
        for (const std::string& value : KeyCells(row, keys)) {
          cells.push_back(value == "-" ? "" : CsvField(value));
        }
        cells.insert(cells.end(), {absl::StrCat(row.points()), absl::StrCat(row.candidates())});
      }
      cells.insert(cells.end(), {CsvField(row.baseline()), absl::StrCat(row.runs()),
                                 absl::StrCat(row.runs_total())});
      for (const tae::v1::ReportCell& c : row.cells()) {
        cells.insert(
            cells.end(),
            {absl::StrCat(c.n()), CsvNum(c.mean()), CsvNum(c.ci95()), CsvNum(c.std()),
             CsvNum(c.best()), c.has_delta() ? CsvNum(c.delta()) : "",
             c.has_delta() ? CsvNum(c.rel_delta()) : "", c.has_test() ? CsvNum(c.p_value()) : "",
             CsvField(c.decision()), c.decision().empty() ? "" : absl::StrCat(c.decision_n()),
             c.level_kind().empty() ? "" : CsvField(c.level_kind()),
             c.has_test() && tae::api::HasDeltaInterval(c) ? CsvNum(c.p_adjusted()) : "",
             tae::api::HasDeltaInterval(c) ? CsvNum(c.delta_lo()) : "",
             tae::api::HasDeltaInterval(c) ? CsvNum(c.delta_hi()) : ""});
      }
      cells.insert(cells.end(), {CsvNum(row.params()), CsvNum(row.flops_per_token()),
                                 CsvNum(row.tokens_per_s())});
      absl::StrAppend(&out, absl::StrJoin(cells, ","), "\n");
    }
    return out;
  }
  std::vector<std::string> header = HumanHeader(report);
  const std::string pm = " ± ";
  std::vector<std::vector<std::string>> rows;
  for (const tae::v1::ReportRow& row : report.rows()) {
    rows.push_back(HumanRow(report, row, pm));
  }
  const tae::v1::Experiment& exp = report.experiment();
  if (format == "table") {
    Table table(header);
    for (auto& row : rows) {
      table.Add(row);
    }
    return absl::StrCat("e", exp.id(), " ", exp.name(), " (", exp.state(), ")\n\n",
                        BannerLines(report), table.Render(), "\n", Legend(report), "\n",
                        SavingsFooter(exp));
  }
  if (format == "md") {
    return absl::StrCat(BannerLines(report), Markdown(header, rows), "\n", Legend(report), "\n",
                        SavingsFooter(exp));
  }
  if (format == "latex") {
    const std::string savings = SavingsFooter(exp);
    return absl::StrCat("% ", Legend(report), "\n", savings.empty() ? "" : "% ", savings,
                        Latex(header, rows));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--format: '", format, "' is not one of table, md, csv, latex, json"));
}

absl::StatusOr<std::pair<std::string, std::string>> ParsePivotSpec(const std::string& spec) {
  std::vector<std::string> parts;
  for (const char* sep : {"×", ","}) {
    parts = absl::StrSplit(spec, absl::MaxSplits(sep, 1));
    if (parts.size() == 2 && !parts[0].empty() && !parts[1].empty()) {
      break;
    }
  }
  if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--pivot: '", spec, "' is not two names joined by × or a comma (e.g. variant×train.task)"));
  }
  return std::make_pair(parts[0], parts[1]);
}

absl::StatusOr<Pivot> BuildPivot(const std::vector<tae::v1::Run>& runs, const std::string& spec,
                                 const std::string& metric) {
  absl::StatusOr<std::pair<std::string, std::string>> keys = ParsePivotSpec(spec);
  if (!keys.ok()) {
    return keys.status();
  }
  Pivot pivot;
  pivot.row_key = keys->first;
  pivot.col_key = keys->second;
  pivot.metric = metric;
  std::map<std::pair<std::string, std::string>, std::vector<double>> values;
  auto value_of = [](const tae::v1::Run& run, const nlohmann::json& config,
                     const std::string& key) -> absl::StatusOr<std::string> {
    if (key == "variant") {
      return run.variant().substr(0, run.variant().find('['));
    }
    if (!config.contains(key)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--pivot: '", key,
                       "' is neither variant nor a key of the runs' config (e.g. "
                       "train.task, model.layers)"));
    }
    return ConfigValue(config, key);
  };
  auto remember = [](std::vector<std::string>* list, const std::string& v) {
    if (std::find(list->begin(), list->end(), v) == list->end()) {
      list->push_back(v);
    }
  };
  for (const tae::v1::Run& run : runs) {
    nlohmann::json config = nlohmann::json::parse(run.config_json(), nullptr, false);
    if (config.is_discarded()) {
      config = nlohmann::json::object();
    }
    absl::StatusOr<std::string> r = value_of(run, config, pivot.row_key);
    absl::StatusOr<std::string> c = value_of(run, config, pivot.col_key);
    if (!r.ok()) {
      return r.status();
    }
    if (!c.ok()) {
      return c.status();
    }
    remember(&pivot.rows, *r);
    remember(&pivot.cols, *c);
    if (run.state() != tae::v1::RUN_STATE_SUCCEEDED) {
      continue;
    }
    for (const tae::v1::Scalar& s : run.final_metrics()) {
      if (s.key() == metric) {
        values[{*r, *c}].push_back(s.value());
      }
    }
  }
  for (const std::string& r : pivot.rows) {
    std::vector<std::string> line;
    for (const std::string& c : pivot.cols) {
      auto it = values.find({r, c});
      if (it == values.end() || it->second.empty()) {
        line.push_back("-");
        continue;
      }
      stats::Summary s = stats::Summarize(it->second);
      line.push_back(
          absl::StrCat(Num(s.mean), std::isnan(s.ci95) ? "" : " ± " + Num(s.ci95), " (", s.n, ")"));
    }
    pivot.cells.push_back(std::move(line));
  }
  return pivot;
}

std::string RenderPivot(const Pivot& pivot, const std::string& format) {
  std::vector<std::string> header = {absl::StrCat(pivot.row_key, " \\ ", pivot.col_key)};
  header.insert(header.end(), pivot.cols.begin(), pivot.cols.end());
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < pivot.rows.size(); ++i) {
    std::vector<std::string> row = {pivot.rows[i]};
    row.insert(row.end(), pivot.cells[i].begin(), pivot.cells[i].end());
    rows.push_back(std::move(row));
  }
  const std::string legend =
      absl::StrCat(pivot.metric, ": final value, mean over succeeded runs ± 95% CI (runs)");
  if (format == "md") {
    return absl::StrCat(Markdown(header, rows), "\n", legend, "\n");
  }
  if (format == "latex") {
    return absl::StrCat("% ", legend, "\n", Latex(header, rows));
  }
  if (format == "csv") {
    auto line = [](const std::vector<std::string>& cells) {
      std::vector<std::string> fields;
      for (const std::string& cell : cells) {
        fields.push_back(CsvField(cell));
      }
      return absl::StrCat(absl::StrJoin(fields, ","), "\n");
    };
    std::string out = line(header);
    for (const auto& row : rows) {
      out += line(row);
    }
    return out;
  }
  Table table(header);
  for (auto& row : rows) {
    table.Add(row);
  }
  return absl::StrCat(table.Render(), "\n", legend, "\n");
}

std::string NoMetricsText(const tae::v1::ReportResponse& report) {
  if (!report.no_metrics()) {
    return "";
  }
  std::string out = absl::StrCat("e", report.experiment().id(), ": ", api::NoMetricsHint());
  if (report.sample_output_size() == 0) {
    return absl::StrCat(out, "r", report.sample_run(), " has printed nothing yet.\n");
  }
  absl::StrAppend(&out, "The last lines r", report.sample_run(),
                  " printed, to write a pattern against:\n");
  for (const std::string& line : report.sample_output()) {
    absl::StrAppend(&out, "  | ", line, "\n");
  }
  return out;
}

}  // namespace tae::report_text
