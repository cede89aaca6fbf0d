#include "server/report/task_levels.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace tae::report {
namespace {

template <typename T>
T ConfigValue(const nlohmann::json& config, const char* key, T fallback) {
  auto it = config.find(key);
  if (it == config.end()) {
    return fallback;
  }
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    return fallback;
  }
}

// log C(n, k)
double LogChoose(int64_t n, int64_t k) {
  return std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0);
}

// P(N = k) for N ~ Binomial(n, p).
double BinomialPmf(int64_t n, int64_t k, double p) {
  if (p >= 1) {
    return k == n ? 1 : 0;
  }
  return std::exp(LogChoose(n, k) + k * std::log(p) + (n - k) * std::log1p(-p));
}

}  // namespace

double MostFrequentShare(int64_t pairs, int64_t values) {
  if (pairs <= 0 || values <= 0) {
    return 0;
  }
  // P(max <= c) = K! / m^K [x^K] (sum_{i <= c} x^i / i!)^m, by multiplying the truncated series m
  // times; E[max] = sum_{c >= 0} (1 - P(max <= c)).
  const int64_t k = pairs;
  double expected_max = 0;
  for (int64_t c = 0; c < k; ++c) {
    std::vector<double> series(k + 1, 0.0);  // coefficients of x^j / (scaled)
    series[0] = 1;
    std::vector<double> factor(k + 1, 0.0);
    for (int64_t i = 0; i <= std::min(c, k); ++i) {
      factor[i] = std::exp(-std::lgamma(i + 1.0));
    }
    for (int64_t bin = 0; bin < values; ++bin) {
      std::vector<double> next(k + 1, 0.0);
      for (int64_t a = 0; a <= k; ++a) {
        if (series[a] == 0) {
          continue;
        }
        for (int64_t i = 0; i <= c && a + i <= k; ++i) {
          next[a + i] += series[a] * factor[i];
        }
      }
      series = std::move(next);
    }
    const double at_most =
        series[k] * std::exp(std::lgamma(k + 1.0) - k * std::log(static_cast<double>(values)));
    expected_max += 1 - at_most;
  }
  return expected_max / static_cast<double>(k);
}

double FrequencyLoss(int64_t pairs, int64_t values) {
  if (pairs <= 0 || values <= 0) {
    return 0;
  }
  // By linearity: sum over the m values of E[(N_v / K)(-log(N_v / K))], N_v ~ Binomial(K, 1/m).
  double per_value = 0;
  const double k = static_cast<double>(pairs);
  for (int64_t count = 1; count <= pairs; ++count) {
    const double share = count / k;
    per_value += BinomialPmf(pairs, count, 1.0 / values) * share * -std::log(share);
  }
  return values * per_value;
}

std::vector<Level> TaskLevels(const nlohmann::json& config, const std::string& metric) {
  std::vector<Level> levels;
  if (!ConfigValue<std::string>(config, "job.command", "").empty()) {
    return levels;
  }
  const bool acc = metric == "eval/acc";
  const bool loss = metric == "eval/loss";
  if (!acc && !loss) {
    return levels;
  }
  const std::string task = ConfigValue<std::string>(config, "train.task", "copy");
  const int64_t vocab = ConfigValue<int64_t>(config, "train.vocab", 16);
  const int64_t seq_len = ConfigValue<int64_t>(config, "train.seq_len", 32);
  const std::string task_tests = absl::StrCat("what ", task, " tests");
  // Answers are uniform over this many symbols.
  int64_t answers = vocab;
  if (task == "assoc_recall") {
    answers = vocab - vocab / 2;
  } else if (task == "lm") {
    answers = 256;
  } else if (task != "copy" && task != "reverse" && task != "sort" && task != "induction" &&
             task != "mod_add") {
    return levels;
  }
  if (answers < 1) {
    return levels;
  }
  levels.push_back({"chance", acc ? 1.0 / answers : std::log(static_cast<double>(answers)),
                    "chance", task_tests});
  if (task == "assoc_recall") {
    const int64_t pairs = std::min(vocab / 2, seq_len / 4);
    if (pairs >= 2) {
      levels.push_back({"shortcut",
                        acc ? MostFrequentShare(pairs, answers) : FrequencyLoss(pairs, answers),
                        "the most-frequent-value shortcut", "the lookup mechanism"});
    }
  } else if (task == "sort" && acc && vocab == 16 && seq_len == 32) {
    // Monte Carlo at the default shape only (docs/tasks.md): a causal model that never reads the
    // unsorted half.
    levels.push_back({"shortcut", 0.29, "the position-only shortcut", "sorting by content"});
    levels.push_back({"shortcut", 0.47, "the order-statistics shortcut", "sorting by content"});
  } else if (task == "lm" && acc && ConfigValue<std::string>(config, "train.data", "").empty()) {
    levels.push_back(
        {"shortcut", 0.18, "the most-frequent-byte shortcut (KJV)", "any language modelling"});
  }
  std::sort(levels.begin(), levels.end(),
            [](const Level& a, const Level& b) { return a.value < b.value; });
  return levels;
}

}  // namespace tae::report
