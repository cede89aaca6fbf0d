#!/usr/bin/env python3
"""The dashboard in a real browser: Debian's chromium, driven headless by python3-selenium and
chromium-driver, against a real taed with real runs (a local agent, tae-train and a live
command job).

usage: dashboard_browser_test.py BIN_DIR OUT_DIR

Checks: no token, no data; the table's cells equal `taectl report --json`; a URL round-trips
its state (zoom included); a new point reaches the chart within 1 s of being stored and the
zoom is kept; the log view follows a live run; an action without the CSRF token is refused and
changes nothing; a baseline at a task's shortcut shows the same banner in the terminal, the JSON
and the page; an asha [search] opens on its tuned table, as `taectl report` chooses it, with the
savings and its rung view, and toggles to the per-point view; a [scale] ladder's view shows
`taectl report --scale`'s fit and taed's figure. Screenshots of every view (light and dark) go to OUT_DIR: look at them.

Exits 77 (ctest: skipped) with "TAE-SKIPPED: reason" when chromium, chromedriver or selenium is
missing.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

BIN = sys.argv[1] if len(sys.argv) > 1 else "build/bin"
OUT = sys.argv[2] if len(sys.argv) > 2 else "build/test-output/dashboard"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def skip(reason):
    print(f"TAE-SKIPPED: {reason}")
    sys.exit(77)


try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
except ImportError:
    skip("python3-selenium is not installed (apt-get install python3-selenium)")
for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
    if not os.access(path, os.X_OK):
        skip(f"{path} is missing (apt-get install {package})")

SMALL = """name = "browser"
[model]
layers = 1
d_model = 16
heads = 2
[train]
task = "copy"
vocab = 8
seq_len = 16
batch_size = 8
steps = 60
eval_every = 10
eval_batches = 2
warmup = 5
threads = 1
seeds = [0, 1]
[[ablation]]
name = "no-pos"
"model.pos_encoding" = "none"
"""

# A job that keeps producing: a point every 0.2 s for 3 minutes, a log line with each, a stderr
# line every 10 (its pace is the job's; the test waits on what it observes).
LIVE_JOB = r"""
import math, sys, time
for i in range(1, 901):
    print(f"Step={i} Loss={2.0 * math.exp(-i / 200.0) + 0.05:.5f}", flush=True)
    if i % 10 == 0:
        print(f"checkpoint-ish note at step {i}", file=sys.stderr, flush=True)
    time.sleep(0.2)
"""

LIVE = """name = "live"
[train]
seeds = [0]
[job]
code = "src"
command = "python3 -u live.py"
"""


# A baseline at assoc_recall's most-frequent-value shortcut (0.3247 at its defaults,
# docs/tasks.md): one layer learns the shortcut, not the lookup (eval/acc 0.319 with seed 0,
# about 5 s). Task levels are tae-train's: a command job's eval/acc has none.
SHORTCUT = """name = "shortcut"
[model]
layers = 1
d_model = 32
heads = 2
[train]
task = "assoc_recall"
batch_size = 32
steps = 1000
lr = 0.003
eval_every = 500
eval_batches = 8
warmup = 10
threads = 1
seeds = [0]
"""

# An asha [search] over three learning rates: lr=0.01 is every variant's best point at every
# step, so it is the tuned table's choice whatever ASHA prunes.
SWEEP_JOB = r"""
import math, sys
lr, offset = float(sys.argv[1]), float(sys.argv[2])
for step in range(1, 13):
    print(f"step={step} loss={(math.log10(lr) + 2) ** 2 + offset + 1 / step:.5f}", flush=True)
"""

TUNED = """name = "tuned"
[train]
seeds = [0]
steps = 12
warmup = 1
[params]
offset = 0.0
[[ablation]]
name = "worse"
"params.offset" = 0.5
[grid]
"train.lr" = [0.01, 1.0, 0.1]
[search]
method = "asha"
metric = "loss"
min_steps = 2
reduction = 3
[job]
code = "src"
command = "python3 sweep.py {train.lr} {params.offset}"
"""


# A script that prints its progress in its own words and was never told about TAE: its table is
# empty, and says why.
SILENT_JOB = r"""
for step in range(1, 21):
    print(f"iter {step}: train loss {3 - step / 10:.3f}", flush=True)
"""

SILENT = """name = "silent"
[train]
seeds = [0]
[job]
code = "src"
command = "python3 silent.py"
"""


# A ladder of four sizes whose loss follows a known law, L = 2 + 100 (m N)^-0.3 with 0.5% seed
# noise: "wide" is worth a baseline 1.5 times its size at every N.
LAW_JOB = r"""
import math, random, sys
n, m, seed = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed * 7919 + int(math.log(n) * 1000) + int(m * 100))
loss = (2 + 100 * (m * n) ** -0.3) * math.exp(0.005 * rng.gauss(0, 1))
print(f"step=1 params={int(n)} loss={loss:.9f}", flush=True)
"""

LADDER = """name = "ladder"
[params]
n = 1e6
m = 1.0
[train]
seeds = [0, 1, 2]
[report]
metrics = ["loss"]
[[ablation]]
name = "wide"
"params.m" = 1.5
[scale]
"params.n" = [1e6, 4e6, 1.6e7, 6.4e7]
[job]
code = "src"
command = "python3 law.py {params.n} {params.m} {train.seed}"
"""


def taectl(home, *args, timeout=600):
    p = subprocess.run([os.path.join(BIN, "taectl"), "--home", home, *args], capture_output=True,
                       text=True, timeout=timeout)
    if p.returncode != 0:
        raise AssertionError(f"taectl {' '.join(args)}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p.stdout


def wait_for(what, pred, timeout=30, every=0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


def make_driver(profile, width=1400, height=900, dark=False):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                 f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    if dark:
        options.add_argument("--force-dark-mode")
        options.add_argument("--blink-settings=preferredColorScheme=0")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


class Dashboard(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tae-browser-")
        cls.home = os.path.join(cls.tmp, "home")
        os.makedirs(OUT, exist_ok=True)
        taectl(cls.home, "up", "--agents", "1", "--slots", "3", timeout=120)
        study = os.path.join(cls.tmp, "browser.toml")
        with open(study, "w") as f:
            f.write(SMALL)
        taectl(cls.home, "submit", study, "--wait")
        os.makedirs(os.path.join(cls.tmp, "src"))
        for name, text in (("live.py", LIVE_JOB), ("sweep.py", SWEEP_JOB), ("silent.py", SILENT_JOB),
                           ("law.py", LAW_JOB)):
            with open(os.path.join(cls.tmp, "src", name), "w") as f:
                f.write(text)
        for name, text in (("live.toml", LIVE), ("shortcut.toml", SHORTCUT), ("tuned.toml", TUNED),
                           ("silent.toml", SILENT), ("ladder.toml", LADDER)):
            with open(os.path.join(cls.tmp, name), "w") as f:
                f.write(text)
            taectl(cls.home, "submit", os.path.join(cls.tmp, name))
        for name in ("shortcut", "tuned", "silent", "ladder"):  # the live job leaves two slots free
            taectl(cls.home, "wait", name, "--timeout", "120")
        cls.url = taectl(cls.home, "ui").strip()
        cls.base = cls.url.split("/?")[0]
        cls.drivers = []
        cls.d = cls.driver()
        cls.d.get(cls.url)  # signs in: the cookie is set, the token leaves the address bar
        wait_for("the experiments page", lambda: "?token" not in cls.d.current_url and
                 cls.d.find_elements(By.CSS_SELECTOR, "table"))
        cookie = cls.d.get_cookie("tae_session")
        cls.cookie = f"tae_session={cookie['value']}"
        cls.live_run = wait_for("the live run to start", cls.live_run_running, timeout=120)

    @classmethod
    def driver(cls, dark=False):
        d = make_driver(os.path.join(cls.tmp, f"profile{len(cls.drivers)}"), dark=dark)
        cls.drivers.append(d)
        return d

    @classmethod
    def tearDownClass(cls):
        for d in cls.drivers:
            d.quit()
        subprocess.run([os.path.join(BIN, "taectl"), "--home", cls.home, "down"],
                       capture_output=True, timeout=120)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def api(cls, path):
        req = urllib.request.Request(cls.base + path, headers={"Cookie": cls.cookie})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    @classmethod
    def live_run_running(cls):
        runs = cls.api("/api/experiments/live/runs")["runs"]
        return runs[0]["id"] if runs and runs[0]["state"] == "running" and runs[0]["last_step"] > 5 else None

    def shot(self, name, d=None):
        (d or self.d).save_screenshot(os.path.join(OUT, f"{name}.png"))

    def js_errors(self, d=None):
        # Script errors only: a refused request is the point of some checks, and each check
        # asserts the statuses it expects.
        return [e for e in (d or self.d).get_log("browser") if e.get("level") == "SEVERE"
                and e.get("source") != "network"]

    def go(self, hash_route, ready_css, d=None):
        d = d or self.d
        d.get(f"{self.base}/{hash_route}")
        return wait_for(f"{ready_css} on {hash_route}", lambda: d.find_elements(By.CSS_SELECTOR, ready_css))

    # ---- the checks ----

    def test_no_token_no_data(self):
        stranger = self.driver()
        stranger.get(self.base + "/")
        body = stranger.find_element(By.TAG_NAME, "body").text
        self.assertIn("taectl ui", body)
        status = stranger.execute_async_script(
            "const done = arguments[0]; fetch('/api/experiments').then(r => done(r.status))")
        self.assertEqual(status, 401)
        stranger.get(self.base + "/?token=wrong")
        self.assertIn("not this taed", stranger.find_element(By.TAG_NAME, "body").text)
        self.shot("signed-out", stranger)

    def test_table_equals_taectl_report(self):
        report = json.loads(taectl(self.home, "report", "browser", "--json"))
        self.go("#/e/browser", "td[data-metric]")
        cells = self.d.execute_script("""
            return [...document.querySelectorAll('td[data-metric]')].map(td => ({
              variant: td.dataset.variant, metric: td.dataset.metric,
              mean: td.dataset.mean, ci95: td.dataset.ci95, n: td.dataset.n,
              delta: td.dataset.delta, text: td.textContent}))""")
        seen = 0
        for row in report["rows"]:
            for metric, cell in row["metrics"].items():
                mine = [c for c in cells if c["variant"] == row["variant"] and c["metric"] == metric]
                self.assertEqual(len(mine), 1, f"{row['variant']} {metric}")
                self.assertEqual(float(mine[0]["mean"]), cell["mean"])
                self.assertEqual(int(mine[0]["n"]), cell["n"])
                if cell["ci95"] is not None:
                    self.assertEqual(float(mine[0]["ci95"]), cell["ci95"])
                if cell["delta"] is not None:
                    self.assertEqual(float(mine[0]["delta"]), cell["delta"])
                seen += 1
        self.assertEqual(seen, len(report["rows"]) * len(report["metrics"]))
        self.assertEqual(self.js_errors(), [])
        self.shot("table")

    def test_frontier_view_equals_taectl_report_frontier(self):
        bar = "eval/loss<=100"  # every variant's whole CI is under it: the cheapest clears it
        f = json.loads(taectl(self.home, "report", "browser", "--frontier", bar, "--json"))
        self.go("#/e/browser/frontier?bar=" + urllib.parse.quote(bar, safe="/"),
                ".frontier-table tbody tr")
        shown = self.d.execute_script("""
            return [...document.querySelectorAll('.frontier-table tbody tr')].map(tr => ({
              variant: tr.dataset.variant, cheapest: tr.classList.contains('cheapest')}))""")
        self.assertEqual([r["variant"] for r in shown], [p["variant"] for p in f["points"]])
        self.assertIsNotNone(f["cheapest"])
        self.assertEqual([r["variant"] for r in shown if r["cheapest"]], [f["cheapest"]["variant"]])
        verdict = self.d.find_element(By.CSS_SELECTOR, ".frontier-verdict").text
        self.assertIn(f"cheapest that clears eval/loss <= 100: {f['cheapest']['variant']}", verdict)
        # The figure is taed's /frontier.svg, drawn.
        wait_for("the frontier figure", lambda: self.d.execute_script(
            "const i = document.querySelector('img.frontier-svg'); return i && i.naturalWidth > 0"))
        self.assertEqual(self.js_errors(), [])
        self.shot("frontier")

    def test_scale_view_equals_taectl_report_scale(self):
        fit = json.loads(taectl(self.home, "report", "ladder", "--scale", "--at", "2e8",
                                "--json"))["scale"]
        self.go("#/e/ladder", ".scale-link:not([hidden])")  # a ladder's table links its fit
        self.go("#/e/ladder/scale?at=2e8", ".scale-fit tbody tr")
        shown = self.d.execute_script("""
            return [...document.querySelectorAll('.scale-fit tbody tr')].map(tr => ({
              variant: tr.dataset.variant, m: tr.querySelector('.scale-m').textContent,
              trend: tr.querySelector('.scale-trend').textContent,
              at: tr.querySelector('.scale-at-effect').textContent}))""")
        self.assertEqual([r["variant"] for r in shown], [v["variant"] for v in fit["variants"]])
        wide = fit["variants"][1]
        m = wide["multiplier"]
        self.assertEqual(shown[1]["m"], "%s [%s, %s]" % tuple(
            self.d.execute_script("return arguments[0].map(x => Number(x).toPrecision(3))",
                                  [m["value"], *m["ci95"]])))
        self.assertEqual(shown[1]["trend"], wide["trend"])
        self.assertIn("(constant)" if wide["at"]["effect"] and wide["at"]["model"] == "constant"
                      else "(trend)", shown[1]["at"])
        law = self.d.find_element(By.CSS_SELECTOR, ".scale-exponent").text
        self.assertEqual(law, self.d.execute_script(
            "return `${Number(arguments[0]).toPrecision(3)} [${Number(arguments[1]).toPrecision(3)}, "
            "${Number(arguments[2]).toPrecision(3)}]`",
            fit["exponent"]["value"], *fit["exponent"]["ci95"]))
        cells = self.d.find_elements(By.CSS_SELECTOR, ".scale-rungs tbody tr")
        self.assertEqual(len(cells), 2)
        self.assertEqual(len(cells[1].find_elements(By.CSS_SELECTOR, "td")), 1 + 4)
        wait_for("the scale figure", lambda: self.d.execute_script(
            "const i = document.querySelector('img.scale-svg'); return i && i.naturalWidth > 0"))
        self.assertEqual(self.js_errors(), [])
        self.shot("scale")
        self.go("#/e/browser", ".scale-link")
        self.assertFalse(self.d.find_element(By.CSS_SELECTOR, ".scale-link").is_displayed())

    def test_url_round_trips_its_state(self):
        route = "#/e/browser/curves?metric=eval%2Floss&smooth=0.6&logy=1"
        self.go(route, ".u-over")
        over = self.d.find_element(By.CSS_SELECTOR, ".u-over")
        # Drag-select the middle of the chart: a zoom.
        ActionChains(self.d).move_to_element_with_offset(over, -over.size["width"] // 4, 0) \
            .click_and_hold().move_by_offset(over.size["width"] // 3, 0).release().perform()
        url = wait_for("zoom in the URL", lambda: "zoom=" in self.d.current_url and self.d.current_url)
        scale = self.d.execute_script("return document.querySelector('[data-x-min]').dataset")
        other = self.driver()
        other.get(self.url)
        wait_for("signed in", lambda: "?token" not in other.current_url)
        other.get(url)
        wait_for("the chart", lambda: other.find_elements(By.CSS_SELECTOR, "[data-x-min]"))
        again = other.execute_script("return document.querySelector('[data-x-min]').dataset")
        self.assertEqual(float(again["xMin"]), float(scale["xMin"]))
        self.assertEqual(float(again["xMax"]), float(scale["xMax"]))
        self.assertIn("smooth=0.6", other.current_url)
        self.assertIn("logy=1", other.current_url)
        self.shot("curves-zoomed", other)

    def test_a_new_point_reaches_the_chart_within_a_second_and_the_zoom_stays(self):
        # A zoom that reaches past the last step, as one keeps it on a live run: new points
        # arrive inside it.
        zoom = "zoom=10,5000"
        self.go(f"#/e/live/curves?metric=Loss&{zoom}", "[data-x-len]")
        before = self.d.execute_script("return document.querySelector('[data-x-min]').dataset")
        self.assertEqual((float(before["xMin"]), float(before["xMax"])), (10.0, 5000.0))
        delays = []
        for _ in range(5):
            shown = int(self.d.execute_script(
                "return document.querySelector('[data-x-len]').dataset.xLen"))

            # The moment taed has stored a point the chart does not show yet.
            def stored_more():
                curves = self.api("/api/experiments/live/curves?metric=Loss&width=1000"
                                  "&x_min=10&x_max=5000")
                return len(curves["x"]) > shown and len(curves["x"])
            target = wait_for("a new point stored", stored_more, timeout=20, every=0.02)
            t0 = time.monotonic()
            wait_for("the new point on the chart", lambda: int(self.d.execute_script(
                "return document.querySelector('[data-x-len]').dataset.xLen")) >= target,
                timeout=5, every=0.01)
            delays.append(time.monotonic() - t0)
        print(f"new point to chart: {', '.join(f'{x * 1000:.0f} ms' for x in delays)}")
        self.assertLess(max(delays), 1.0)
        now = self.d.execute_script("return document.querySelector('[data-x-min]').dataset")
        self.assertEqual((now["xMin"], now["xMax"]), (before["xMin"], before["xMax"]))
        self.assertIn(zoom, self.d.current_url)
        self.shot("curves-live")

    def test_the_log_view_follows_a_live_run(self):
        self.go(f"#/r/{self.live_run}?tab=logs", "[data-cursor]")
        for _ in range(3):
            last = self.api(f"/api/runs/{self.live_run}/logs?after=0&limit=10000")["lines"][-1]
            wait_for(f"log line {last['cursor']} on the page", lambda: self.d.execute_script(
                f"return !!document.querySelector('[data-cursor=\"{last['cursor']}\"]')"),
                timeout=5, every=0.05)
        stderr = self.d.find_elements(By.CSS_SELECTOR, "[data-stream='stderr']")
        self.assertTrue(stderr, "stderr lines are marked")
        self.shot("run-logs")

    def test_an_action_without_the_csrf_token_is_refused(self):
        self.go("#/e/browser", "td[data-metric]")
        status = self.d.execute_async_script("""
            const done = arguments[0];
            fetch('/api/experiments/browser/pause', {method: 'POST'}).then(r => done(r.status))""")
        self.assertEqual(status, 403)
        self.assertFalse(self.api("/api/experiments/browser")["paused"])

    def test_a_baseline_at_a_shortcut_shows_its_banner_in_the_terminal_json_and_page(self):
        report = json.loads(taectl(self.home, "report", "shortcut", "--json"))
        banners = report["banners"]
        self.assertEqual(len(banners), 1, banners)
        self.assertIn("eval/acc: baseline is at the most-frequent-value shortcut", banners[0])
        terminal = taectl(self.home, "report", "shortcut")
        self.assertIn(f"! {banners[0]}\n", terminal)
        self.go("#/e/shortcut", ".level-banner")
        shown = [e.text for e in self.d.find_elements(By.CSS_SELECTOR, ".level-banner")]
        self.assertEqual(shown, banners)
        self.assertEqual(self.js_errors(), [])
        self.shot("table-shortcut")

    def test_an_empty_table_says_why_with_the_lines_a_run_printed(self):
        report = json.loads(taectl(self.home, "report", "silent", "--json"))
        why = report["no_metrics"]
        self.assertEqual(why["sample_output"][-1], "iter 20: train loss 1.000")
        self.go("#/e/silent", ".no-metrics")
        banner = self.d.find_element(By.CSS_SELECTOR, ".no-metrics").text
        self.assertIn("No run has reported a metric", banner)
        for way in ("tae_log", "key=value", "[job.metrics]", "job.tensorboard"):
            self.assertIn(way, banner)
        shown = self.d.find_element(By.CSS_SELECTOR, ".no-metrics .sample-output").text
        self.assertEqual(shown.split("\n"), why["sample_output"])
        self.assertEqual(self.js_errors(), [])
        # Its run's config lists what reaches a command job; tae-train's keys fold away.
        run = json.loads(taectl(self.home, "runs", "silent", "--json"))[0]["id"]
        self.go(f"#/r/{run}", ".config-hidden")
        keys = [e.text for e in self.d.find_elements(By.CSS_SELECTOR, "table.kv td.key")]
        self.assertIn("job.command", keys)
        self.assertIn("train.seed", keys)
        self.assertNotIn("model.d_model", keys)
        self.d.find_element(By.CSS_SELECTOR, ".config-toggle").click()
        wait_for("every config key", lambda: "model.d_model" in [
            e.text for e in self.d.find_elements(By.CSS_SELECTOR, "table.kv td.key")])
        self.assertEqual(self.js_errors(), [])

    def test_an_asha_search_opens_on_its_tuned_table_and_toggles_to_every_point(self):
        report = json.loads(taectl(self.home, "report", "tuned", "--json"))
        self.assertEqual(report["view"], "tuned")
        self.assertEqual([r["point_name"] for r in report["rows"]], ["lr=0.01"] * 2)
        self.assertIsNotNone(report["savings"])
        self.assertIn("search: ", taectl(self.home, "report", "tuned"))
        self.go("#/e/tuned", "td[data-point]")
        shown = self.d.execute_script("""
            return [...document.querySelectorAll('td[data-point]')].map(td => td.dataset.point)""")
        self.assertEqual(shown, [r["point_name"] for r in report["rows"]])
        means = self.d.execute_script("""
            return [...document.querySelectorAll('td[data-metric="loss"]')].map(td => Number(td.dataset.mean))""")
        self.assertEqual(means, [r["metrics"]["loss"]["mean"] for r in report["rows"]])
        self.assertIn("of the full grid's steps", self.d.find_element(By.CSS_SELECTOR, ".savings").text)
        self.assertIn("on", self.d.find_element(By.CSS_SELECTOR, ".view-toggle [data-view=tuned]").get_attribute("class"))
        # The rung view: one cell per point and rung, the last decision there (a rung that waited
        # for its bootstrap stores "wait" and later the point's keep or prune), its verdict marked.
        last = {}
        for d in report["decisions"]:
            last[(d["point"], d["rung"])] = d
        decisions = list(last.values())
        self.assertTrue(decisions)
        cells = self.d.execute_script("""
            return [...document.querySelectorAll('.rung-table td[data-verdict]')].map(td => [
              td.closest('tr').dataset.point, td.closest('table').dataset.group, td.dataset.verdict])""")
        self.assertEqual(sorted(map(tuple, cells)),
                         sorted((d["point"], d["group"], d["verdict"]) for d in decisions))
        self.assertEqual(len(self.d.find_elements(By.CSS_SELECTOR, ".rung-table td.rung-prune")),
                         sum(d["verdict"] == "prune" for d in decisions))
        self.shot("table-tuned")
        self.d.find_element(By.CSS_SELECTOR, ".view-toggle [data-view=grid]").click()
        wait_for("the per-point view", lambda: "view=grid" in self.d.current_url and len(
            self.d.find_elements(By.CSS_SELECTOR, 'td[data-metric="loss"]')) == 6)
        self.assertFalse(self.d.find_elements(By.CSS_SELECTOR, "td[data-point]"))
        pruned = self.api("/api/experiments/tuned")["counts"]["pruned"]
        self.assertEqual(bool(pruned), bool(self.d.find_elements(By.CSS_SELECTOR, ".chip-pruned")))
        self.assertEqual(self.js_errors(), [])
        self.shot("table-grid")

    def test_screenshots_of_every_view(self):
        views = [("experiments", "#/", "table"),
                 ("table", "#/e/browser", "td[data-metric]"),
                 ("curves", "#/e/browser/curves?metric=eval%2Floss", ".u-over"),
                 ("curves-delta", "#/e/browser/curves?metric=eval%2Floss&delta=1", ".u-over"),
                 ("run", "#/r/1", "table"),
                 ("fleet", "#/fleet", "table")]
        dark = self.driver(dark=True)
        dark.get(self.url)
        wait_for("signed in", lambda: "?token" not in dark.current_url)
        for name, route, css in views:
            self.go(route, css)
            self.shot(f"{name}-light")
            self.go(route, css, d=dark)
            self.shot(f"{name}-dark", dark)
        self.assertEqual(self.js_errors(), [])
        self.assertEqual(self.js_errors(dark), [])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
