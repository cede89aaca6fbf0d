#!/usr/bin/python3
"""Drive the dashboard in headless Chromium against the real taed on the seeded study of
dev_taed.py: take a screenshot of every view in light and dark mode, exercise the keyboard and
the URL state, and fail on JS errors.

    /usr/bin/python3 web/dev_screenshots.py [--out /tmp/tae-web-shots] [--theme light|dark|both]
                                            [--web src|embedded] [--bin build/bin]

Needs chromium and chromedriver (Debian: apt-get install chromium chromium-driver), selenium
for /usr/bin/python3 (python3-selenium) and the built programs (build/bin). Starts its own taed
on a temporary TAE_HOME (dev_taed.DevTaed, about 30 s to seed) and the front that serves web/src
from the working tree (--web embedded: taed's own, compiled-in files instead).
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

import dev_taed

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

# Console errors that the scenario causes on purpose.
EXPECTED = ("status of 404", "status of 401", "status of 409")


class Check:
    def __init__(self):
        self.failures = []
        self.passed = 0

    def __call__(self, ok, what):
        if ok:
            self.passed += 1
            print(f"  ok    {what}")
        else:
            self.failures.append(what)
            print(f"  FAIL  {what}")


def make_driver(profile, width=1440, height=900):
    o = webdriver.ChromeOptions()
    o.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--disable-dev-shm-usage", f"--user-data-dir={profile}", f"--window-size={width},{height}",
              "--force-device-scale-factor=1", "--hide-scrollbars"):
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=o)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="/tmp/tae-web-shots")
    ap.add_argument("--theme", choices=["light", "dark", "both"], default="both")
    ap.add_argument("--web", choices=["src", "embedded"], default="src",
                    help="src: web/src from the working tree; embedded: the files built into taed")
    ap.add_argument("--bin", help="where taed and taectl are (default: build/bin)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    check = Check()
    js_errors = []
    tmp = tempfile.mkdtemp(prefix="tae-chromium-")
    print("== seeding taed (web/dev_taed.py)")
    dev = dev_taed.DevTaed(a.bin, web=a.web, live_minutes=20, log=lambda m: print("  " + m))
    try:
        dev.start()
        base = dev.base
        runs = {name: dev.runs(name) for name in ("quickstart", "flaky", "long-log", "live")}
        ids = {e["name"]: e["id"] for e in dev.taectl_json("ls")}
        seeded = Seeded(
            ids=ids,
            run_ok=next(r["id"] for r in runs["quickstart"] if r["variant"] == "baseline"),
            run_retried=next(r["id"] for r in runs["flaky"] if r["attempt"] == 2 and r["state"] == "succeeded"),
            run_live=next(r["id"] for r in runs["live"] if r["state"] == "running"),
            run_long=runs["long-log"][0]["id"])  # 120000 log lines, 6000 steps
        themes = ["light", "dark"] if a.theme == "both" else [a.theme]
        for theme in themes:
            print(f"== {theme}")
            d = make_driver(os.path.join(tmp, theme))
            try:
                scenario(d, base, dev, theme, a.out, check, js_errors, seeded)
            finally:
                d.quit()
        print("== not signed in")
        d = make_driver(os.path.join(tmp, "nocookie"))
        try:
            d.get(base + "/#/e/quickstart")
            body = d.find_element(By.TAG_NAME, "body").text
            check("Not signed in" in body and "taectl ui" in body, "without the cookie taed answers its sign-in page")
            shot(d, a.out, "signin-page-light")
            # signed in, then the cookie goes (expired, revoked): the page's next call says so
            d.get(dev.url)
            wait_css(d, "table.tbl tbody tr")
            d.delete_cookie("tae_session")
            go(d, base, "#/e/quickstart")
            wait_css(d, ".signin")
            check("Not signed in" in d.find_element(By.CSS_SELECTOR, ".signin").text, "a 401 shows the sign-in page")
            shot(d, a.out, "signin-light")
            collect(d, js_errors, "signin")
        finally:
            d.quit()
        print("== taed goes away")
        d = make_driver(os.path.join(tmp, "down"))
        try:
            d.get(dev.url)
            wait_css(d, "table.tbl tbody tr")
            go(d, base, f"#/r/{seeded.run_ok}")
            wait_css(d, "table.heat")
            dev.stop_taed()
            d.find_element(By.XPATH, "//button[starts-with(normalize-space(), 'Retry e')]").click()
            wait_css(d, ".toast.error")
            check("did not answer" in d.find_element(By.CSS_SELECTOR, ".toast.error").text,
                  "an action that fails shows why in a toast")
            shot(d, a.out, "run-toast-error-light")
            d.get(base + "/#/fleet")
            wait_until(d, lambda: "did not answer" in d.find_element(By.ID, "main").text)
            check("taed did not answer" in d.find_element(By.ID, "main").text, "a dead taed says so")
            wait_until(d, lambda: "reconnecting" in d.find_element(By.ID, "live").text)
            check("reconnecting" in d.find_element(By.ID, "live").text, "the live indicator says reconnecting")
            shot(d, a.out, "down-light")
            dev.start_taed()  # the same port (TAE_HOME/http.addr)
            # Sessions live in taed's memory: the page learns that it is signed out, and the
            # URL signs it in again.
            wait_until(d, lambda: d.find_elements(By.CSS_SELECTOR, ".signin"), timeout=15)
            check(bool(d.find_elements(By.CSS_SELECTOR, ".signin")), "when taed is back the page asks to sign in again")
            d.get(dev.url)
            wait_css(d, "table.tbl tbody tr")
            go(d, base, "#/fleet")
            wait_until(d, lambda: d.find_elements(By.CSS_SELECTOR, ".slots"), timeout=15)
            check(bool(d.find_elements(By.CSS_SELECTOR, ".slots")), "and the view is back once signed in")
        finally:
            d.quit()
    except dev_taed.DevError as e:
        check(False, f"dev_taed: {e}")
    finally:
        dev.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n{check.passed} checks passed, {len(check.failures)} failed; screenshots in {a.out}")
    for f in check.failures:
        print("  failed:", f)
    if js_errors:
        print("JS console errors:")
        for e in js_errors:
            print("  ", e)
    sys.exit(1 if check.failures or js_errors else 0)


class Seeded:
    """What the scenario needs to know of the seeded study: experiment ids by name, and runs."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def wait_css(d, css, timeout=10):
    try:
        return WebDriverWait(d, timeout).until(EC.presence_of_element_located((By.CSS_SELECTOR, css)))
    except TimeoutException:
        raise AssertionError(f"timed out waiting for {css} at {d.current_url}")


def wait_until(d, fn, timeout=10, what=""):
    try:
        return WebDriverWait(d, timeout).until(lambda _: fn())
    except TimeoutException:
        return False


def shot(d, out, name):
    time.sleep(0.3)
    path = os.path.join(out, name + ".png")
    d.save_screenshot(path)
    print(f"  shot  {path}")


def collect(d, sink, where):
    for entry in d.get_log("browser"):
        if entry["level"] in ("SEVERE",) and not any(x in entry["message"] for x in EXPECTED):
            sink.append(f"{where}: {entry['message']}")


def key(d, k):
    ActionChains(d).send_keys(k).perform()
    time.sleep(0.25)


def hash_of(d):
    return d.execute_script("return location.hash")


def go(d, base, h):
    d.get(base + "/" + h)
    # (a hash change keeps the document: keep every request in the resource timings)
    d.execute_script("window.confirm = () => true; performance.setResourceTimingBufferSize(100000)")


def data_x(d):
    """The chart element's data-x-min, -max, -len."""
    return d.execute_script("const s = document.querySelector('[data-x-min]')?.dataset; return s ? [s.xMin, s.xMax, s.xLen] : null")


def last_curves_fetch(d):
    return d.execute_script("return performance.getEntriesByType('resource').map(e => e.name)"
                            ".filter(n => n.includes('/curves?')).pop() || ''")


def log_state(d):
    """The cursors of the log lines in the DOM, the one at the top of the box, and the status line."""
    return d.execute_script("""
        const b = document.querySelector('.logbox'), r = b.getBoundingClientRect();
        const cs = [...b.querySelectorAll('[data-cursor]')].map(e => +e.dataset.cursor);
        const at = document.elementFromPoint(r.left + 150, r.top + 4)?.closest('[data-cursor]');
        return {min: Math.min(...cs), max: Math.max(...cs), top: at ? +at.dataset.cursor : null,
                bottom: b.scrollTop + b.clientHeight >= b.scrollHeight - 20,
                status: document.querySelector('.log-status').textContent,
                cur: +(document.querySelector('.logline.cur')?.dataset.cursor || 0)}""")


def scenario(d, base, dev, theme, out, check, js_errors, seeded):
    ids = seeded.ids
    run_ok, run_retried, run_live, run_long = seeded.run_ok, seeded.run_retried, seeded.run_live, seeded.run_long
    if theme == "dark":
        d.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    d.get(dev.url)
    wait_css(d, "table.tbl tbody tr")
    d.execute_script("window.confirm = () => true")
    check(d.execute_script("return document.documentElement.dataset.effectiveTheme") == theme, f"{theme}: theme follows prefers-color-scheme")

    # experiments: list, filter, keyboard
    shot(d, out, f"experiments-{theme}")
    key(d, "/")
    check(d.execute_script("return document.activeElement.type") == "search", "/ focuses the filter")
    ActionChains(d).send_keys("learning").perform()
    time.sleep(0.5)
    check("filter=learning" in hash_of(d), "the filter is in the URL")
    rows = d.find_elements(By.CSS_SELECTOR, "table.tbl tbody tr")
    check(len(rows) == 2, f"filter 'learning' leaves 2 experiments, lr-sweep and asha (got {len(rows)})")
    key(d, Keys.ESCAPE)
    key(d, "j")
    key(d, "j")
    check(len(d.find_elements(By.CSS_SELECTOR, "tr.sel")) == 1, "j selects a row")
    shot(d, out, f"experiments-filter-{theme}")
    key(d, Keys.ENTER)
    want = f"#/e/{ids['lr-sweep']}"
    wait_until(d, lambda: hash_of(d).startswith(want))
    check(hash_of(d).startswith(want), f"Enter opens the selected experiment ({hash_of(d)})")
    d.back()
    wait_css(d, "table.tbl tbody tr")
    check(d.find_element(By.CSS_SELECTOR, "input[type=search]").get_attribute("value") == "learning", "Back restores the filter")
    collect(d, js_errors, "experiments")

    # the ablation table
    go(d, base, "#/e/quickstart")
    wait_css(d, "table.tbl tbody tr.is-base")
    shot(d, out, f"table-{theme}")
    cells = d.execute_script("return [...document.querySelectorAll('td[data-metric]')].map(td => ({...td.dataset}))")
    check(len(cells) == 6 and all(c["mean"] and c["n"] for c in cells), f"every mean cell carries its numbers ({len(cells)} cells)")
    key(d, "j")
    key(d, "j")
    key(d, "b")
    wait_until(d, lambda: "baseline=" in hash_of(d))
    check("baseline=" in hash_of(d), f"b sets the baseline ({hash_of(d)})")
    time.sleep(0.6)
    shot(d, out, f"table-baseline-{theme}")
    go(d, base, "#/e/lr-sweep?metrics=eval/loss,eval/acc,perf/tokens_per_s")
    wait_css(d, "table.tbl tbody tr")
    shot(d, out, f"table-grid-{theme}")
    d.find_element(By.CSS_SELECTOR, ".menu-wrap .btn").click()
    check(d.find_element(By.CSS_SELECTOR, ".menu").is_displayed(), "the metrics menu opens")
    shot(d, out, f"table-metrics-menu-{theme}")
    key(d, Keys.ESCAPE)
    check(not d.find_element(By.CSS_SELECTOR, ".menu").is_displayed(), "Esc closes it")
    key(d, "g")
    wait_css(d, "table.pivot")
    check("pivot=" in hash_of(d), f"g pivots ({hash_of(d)})")
    shot(d, out, f"pivot-{theme}")
    key(d, "g")
    key(d, "g")
    key(d, "g")
    check("pivot=" not in hash_of(d), "g cycles back to no pivot")
    go(d, base, "#/e/live")
    wait_css(d, "table.tbl tbody tr")
    shot(d, out, f"table-running-{theme}")
    go(d, base, "#/e/asha")
    wait_css(d, "table.tbl tbody tr")
    check(bool(d.find_elements(By.XPATH, "//*[contains(text(), 'pruned')]")), "an asha search opens on its tuned table, with pruned runs")
    shot(d, out, f"table-tuned-{theme}")
    go(d, base, "#/e/flaky")
    wait_css(d, "table.tbl tbody tr")
    shot(d, out, f"table-failed-{theme}")
    # click a row -> curves of that variant and its baseline
    go(d, base, "#/e/quickstart")
    wait_css(d, "table.tbl tbody tr.is-base")
    d.find_elements(By.CSS_SELECTOR, "table.tbl tbody tr")[1].click()
    wait_until(d, lambda: "/curves" in hash_of(d))
    check("/curves" in hash_of(d) and "variants=" in hash_of(d), f"a row click opens its curves ({hash_of(d)})")
    collect(d, js_errors, "table")

    # curves, live (the experiment by name, as taectl takes it)
    go(d, base, "#/e/live/curves?metric=train/loss")
    wait_css(d, ".uplot canvas")
    time.sleep(0.5)
    x1 = data_x(d)
    shot(d, out, f"curves-live-{theme}")
    wait_until(d, lambda: float(data_x(d)[1]) > float(x1[1]), timeout=5)
    x2 = data_x(d)
    check(float(x2[1]) > float(x1[1]), f"live curves grow (to step {x1[1]} -> {x2[1]})")
    # drag to zoom, then reload: the zoom comes back from the URL
    over = d.find_element(By.CSS_SELECTOR, ".u-over")
    w = over.size["width"]
    ActionChains(d).move_to_element_with_offset(over, int(-w * 0.3), 0).click_and_hold() \
        .move_by_offset(int(w * 0.3), 0).release().perform()
    time.sleep(0.6)
    h1 = hash_of(d)
    check("zoom=" in h1, f"a drag writes zoom= ({h1})")
    zoom = h1.split("zoom=")[1].split("&")[0].split(",")
    shown = d.execute_script("const s = document.querySelector('[data-x-min]').dataset; return [s.xMin, s.xMax]")
    check([float(x) for x in shown] == [float(x) for x in zoom], f"the chart shows exactly the URL's range ({shown} vs {zoom})")
    wait_until(d, lambda: "x_min=" in last_curves_fetch(d), timeout=5)
    fetched = last_curves_fetch(d)
    check(f"x_min={zoom[0]}&x_max={zoom[1]}" in fetched, f"the zoom fetches its range (…{fetched[fetched.find('x_min'):]})")
    d.refresh()
    wait_css(d, "[data-x-min]")
    time.sleep(1.0)
    check("zoom=" in hash_of(d), "the zoom survives a reload")
    again = d.execute_script("const s = document.querySelector('[data-x-min]').dataset; return [s.xMin, s.xMax]")
    check(again == shown, f"and shows the same range after it ({again})")
    check(f"x_min={zoom[0]}&x_max={zoom[1]}" in last_curves_fetch(d), "the reload fetches the zoom's range")
    shot(d, out, f"curves-zoom-{theme}")
    time.sleep(1.5)
    check(hash_of(d).split("zoom=")[1].split("&")[0].split(",") == zoom, "live updates keep the zoom")
    key(d, "e")
    hrefs = [x.get_attribute("href") for x in d.find_elements(By.CSS_SELECTOR, ".menu:not([hidden]) a")]
    check(hrefs and all(f"x_min={zoom[0]}&x_max={zoom[1]}" in x for x in hrefs), "the exports carry the zoom's range")
    key(d, Keys.ESCAPE)
    # a zoom reaching past the last point: new points arrive inside it, the range stays
    last = dev.api("/api/experiments/live/curves?metric=train/loss&width=1000")["x"][-1]
    z2 = [last - 30, last + 600]
    go(d, base, f"#/e/live/curves?metric=train/loss&zoom={z2[0]},{z2[1]}")
    # (the same view: until its answer comes, the chart shows the old points in the new range)
    wait_until(d, lambda: f"x_min={z2[0]}&x_max={z2[1]}" in last_curves_fetch(d))
    time.sleep(0.3)
    x1 = data_x(d)
    wait_until(d, lambda: int(data_x(d)[2]) > int(x1[2]), timeout=5)
    x2 = data_x(d)
    check(int(x2[2]) > int(x1[2]) and x2[:2] == x1[:2] and [float(v) for v in x1[:2]] == z2,
          f"while zoomed, new points are drawn and the range stays ({x1} -> {x2})")
    # full detail inside a zoom: every step of 1000..3000, not the buckets of all 6000
    go(d, base, "#/e/long-log/curves?metric=train/loss&zoom=1000,3000")
    wait_until(d, lambda: data_x(d) and data_x(d)[2] == "2001", timeout=15)
    check(data_x(d) == ["1000", "3000", "2001"], f"a zoom draws every point in its range ({data_x(d)})")
    shot(d, out, f"curves-zoom-detail-{theme}")
    ActionChains(d).double_click(d.find_element(By.CSS_SELECTOR, ".u-over")).perform()
    wait_until(d, lambda: data_x(d) and float(data_x(d)[1]) > 3000, timeout=15)
    check("zoom=" not in hash_of(d) and "x_min" not in last_curves_fetch(d) and float(data_x(d)[1]) > 3000,
          f"a double-click resets the zoom and fetches the whole range ({data_x(d)})")
    go(d, base, f"#/e/live/curves?metric=train/loss&zoom={zoom[0]},{zoom[1]}")
    wait_css(d, "[data-x-min]")
    key(d, "z")
    check("zoom=" not in hash_of(d), "z resets the zoom")
    key(d, "s")
    check("smooth=0.6" in hash_of(d), f"s cycles smoothing ({hash_of(d)})")
    key(d, "s")
    check("smooth=0.9" in hash_of(d), "s cycles smoothing again")
    time.sleep(0.6)
    shot(d, out, f"curves-smooth-{theme}")
    go(d, base, "#/e/quickstart/curves?metric=eval/loss&delta=1&minmax=1")
    wait_css(d, ".uplot canvas")
    shot(d, out, f"curves-delta-{theme}")
    key(d, "e")
    check(len(d.find_elements(By.CSS_SELECTOR, ".menu:not([hidden]) a")) == 3, "e opens the export menu")
    hrefs = [x.get_attribute("href") for x in d.find_elements(By.CSS_SELECTOR, ".menu:not([hidden]) a")]
    check(any("curves.svg?" in x and "delta=1" in x for x in hrefs), "the SVG export carries the view's parameters")
    check(any("download=1" in x for x in hrefs), "the JSON export has download=1")
    shot(d, out, f"curves-export-{theme}")
    key(d, Keys.ESCAPE)
    go(d, base, "#/e/quickstart/curves?metric=train/loss&logy=1&x=tokens")
    wait_css(d, ".uplot canvas")
    shot(d, out, f"curves-logy-{theme}")
    go(d, base, "#/e/lr-sweep/curves?metric=eval/acc&x=wall")
    wait_css(d, ".uplot canvas")
    shot(d, out, f"curves-grid-wall-{theme}")
    go(d, base, "#/e/needs-tpu/curves")
    wait_css(d, ".chart-msg")
    wait_until(d, lambda: "No" in d.find_element(By.CSS_SELECTOR, ".chart-msg").text)
    check("No" in d.find_element(By.CSS_SELECTOR, ".chart-msg").text, f"empty curves say so ({d.find_element(By.CSS_SELECTOR, '.chart-msg').text})")
    collect(d, js_errors, "curves")

    # run
    go(d, base, f"#/r/{run_ok}")
    wait_css(d, "table.heat")
    wait_css(d, ".small-chart .uplot")
    shot(d, out, f"run-{theme}")
    d.execute_script("document.querySelector('.heat-wrap').scrollIntoView({block: 'center'})")
    shot(d, out, f"run-heads-{theme}")
    # an action: taed's answer shows in a toast (a refused one: "taed goes away" below)
    d.execute_script("window.scrollTo(0, 0)")
    d.find_element(By.XPATH, "//button[starts-with(normalize-space(), 'Retry e')]").click()
    wait_css(d, ".toast.ok")
    check("retrying" in d.find_element(By.CSS_SELECTOR, ".toast.ok").text, "an action posts and says so in a toast")
    shot(d, out, f"run-toast-{theme}")
    go(d, base, f"#/r/{run_retried}?tab=logs&q=warning")
    wait_css(d, ".logline")
    wait_until(d, lambda: "/" in d.find_element(By.CSS_SELECTOR, ".toolbar .mono").text)
    key(d, "n")
    key(d, "n")
    wait_css(d, ".logline.cur")
    check(len(d.find_elements(By.CSS_SELECTOR, ".logline mark")) > 0, "search matches are highlighted")
    check(len(d.find_elements(By.CSS_SELECTOR, "[data-stream='stderr'][data-cursor]")) > 0, "stderr lines are marked")
    check(d.find_element(By.CSS_SELECTOR, ".toolbar .mono").text.startswith("2 /"), f"n jumps to the 2nd match ({d.find_element(By.CSS_SELECTOR, '.toolbar .mono').text})")
    shot(d, out, f"logs-search-{theme}")
    # a long log opens at its end; scrolling to the top loads the page before without moving the view
    end = dev.api(f"/api/runs/{run_long}/logs?tail=1")["next"]
    go(d, base, f"#/r/{run_long}?tab=logs")
    wait_css(d, ".logline[data-cursor]")
    wait_until(d, lambda: log_state(d)["max"] == end)
    st = log_state(d)
    check(st["max"] == end and st["bottom"] and st["status"].startswith("1,000 lines loaded"),
          f"the log opens at its end (line {st['max']} of {end}; {st['status']})")
    box = d.find_element(By.CSS_SELECTOR, ".logbox")
    d.execute_script("arguments[0].scrollTop = 0", box)
    time.sleep(0.2)
    first = log_state(d)["top"]
    wait_until(d, lambda: log_state(d)["status"].startswith("2,000 lines"))
    time.sleep(0.2)
    st = log_state(d)
    check(st["status"].startswith("2,000 lines") and st["min"] < first and st["top"] == first,
          f"scrolling up loads older lines and keeps the view (top line {first} -> {st['top']}, lines from {st['min']})")
    shot(d, out, f"logs-older-{theme}")
    # a search match a few pages above what is loaded: n loads up to it
    want = dev.api(f"/api/runs/{run_long}/logs/search?q=eval%20step%205900%3A")["matches"]
    go(d, base, f"#/r/{run_long}?tab=logs&q=eval%20step%205900%3A")
    wait_until(d, lambda: "/" in d.find_element(By.CSS_SELECTOR, ".toolbar .mono").text)
    key(d, "n")
    wait_until(d, lambda: log_state(d)["cur"] == want[0])
    st = log_state(d)
    check(len(want) == 1 and st["cur"] == want[0] and want[0] < end - 1000,
          f"n jumps to a match in an older page that was not loaded (line {st['cur']}; {st['status']})")
    shot(d, out, f"logs-search-older-{theme}")
    # one far away: the lines around it are loaded; f goes back to the end
    first = dev.api(f"/api/runs/{run_long}/logs/search?q=config%3A")["matches"][0]
    go(d, base, f"#/r/{run_long}?tab=logs&q=config%3A")
    wait_until(d, lambda: "/" in d.find_element(By.CSS_SELECTOR, ".toolbar .mono").text)
    key(d, "n")
    wait_until(d, lambda: log_state(d)["cur"] == first)
    check(log_state(d)["cur"] == first, f"n jumps to a match at the start of a long log ({log_state(d)['status']})")
    key(d, "f")
    wait_until(d, lambda: log_state(d)["max"] == end)
    check(log_state(d)["max"] == end and log_state(d)["bottom"], "f goes back to the end")
    # stderr only (a line in ~200): a page holds a few rows, so more pages load to fill the box
    d.find_element(By.CSS_SELECTOR, "button[data-s='stderr']").click()

    def loaded():
        return int(log_state(d)["status"].split(" lines loaded")[0].replace(",", "") or 0)
    wait_until(d, lambda: loaded() > 2000)
    streams = set(d.execute_script("return [...document.querySelectorAll('[data-stream]')].map(e => e.dataset.stream)"))
    check(loaded() > 2000 and streams == {"stderr"},
          f"a stream filter loads older pages to fill the view ({log_state(d)['status']}; {streams})")
    shot(d, out, f"logs-stderr-{theme}")
    go(d, base, f"#/r/{run_live}?tab=logs")
    wait_css(d, ".logline")
    time.sleep(2.5)
    box = d.find_element(By.CSS_SELECTOR, ".logbox")
    at_bottom = d.execute_script("const b=arguments[0]; return b.scrollTop + b.clientHeight >= b.scrollHeight - 20", box)
    check(at_bottom, "follow mode stays at the bottom as lines arrive")
    check("following live output" in d.find_element(By.CSS_SELECTOR, ".log-status").text, "the status says it follows")
    shot(d, out, f"logs-follow-{theme}")
    d.execute_script("arguments[0].scrollTop = 0", box)
    time.sleep(0.3)
    top = log_state(d)["top"]
    time.sleep(1.5)
    st = log_state(d)
    check(st["top"] == top and not st["bottom"] and "paused" in st["status"],
          f"scrolling up pauses follow (top line {top} -> {st['top']}; {st['status']})")
    check(d.find_element(By.CSS_SELECTOR, ".follow-btn").is_displayed(), "the Follow button shows while paused")
    collect(d, js_errors, "run")

    # actions: pause the live study from its table, then resume it
    go(d, base, "#/e/live")
    wait_css(d, "table.tbl tbody tr")
    d.find_element(By.XPATH, "//button[normalize-space()='Pause']").click()
    wait_css(d, ".toast.ok")
    wait_until(d, lambda: d.find_elements(By.CSS_SELECTOR, ".page-head .paused-chip"))
    check(bool(d.find_elements(By.CSS_SELECTOR, ".page-head .paused-chip")), "Pause pauses (and the header says so)")
    d.find_element(By.XPATH, "//button[normalize-space()='Resume']").click()
    wait_until(d, lambda: not d.find_elements(By.CSS_SELECTOR, ".page-head .paused-chip"))
    check(not d.find_elements(By.CSS_SELECTOR, ".page-head .paused-chip"), "Resume resumes")

    # fleet (a tall window: every panel)
    go(d, base, "#/fleet")
    wait_css(d, ".slots")
    d.set_window_size(1440, 1300)
    shot(d, out, f"fleet-{theme}")
    d.set_window_size(1440, 900)
    # (the table is rebuilt as the agent's heartbeats come in: find the button afresh each time)
    button = ("const tr = [...document.querySelectorAll('tr')].find((tr) => [...tr.cells]"
              ".some((td) => td.textContent.trim() === 'local-0')); const b = tr?.querySelector('button');")
    for before, after in (("Drain", "Undrain"), ("Undrain", "Drain")):
        check(d.execute_script(button + "return b?.textContent.trim()") == before, f"local-0's button says {before}")
        d.execute_script(button + "b.click()")
        wait_css(d, ".toast.ok")
        wait_until(d, lambda: d.execute_script(button + "return b?.textContent.trim()") == after)
        check(d.execute_script(button + "return b?.textContent.trim()") == after, f"{before} posts and the agent's state follows")
    collect(d, js_errors, "fleet")

    # help, not found
    key(d, "?")
    check(d.find_element(By.ID, "help").is_displayed(), "? opens the help")
    shot(d, out, f"help-{theme}")
    key(d, Keys.ESCAPE)
    go(d, base, "#/e/999")
    wait_css(d, ".state-msg.error")
    shot(d, out, f"notfound-{theme}")

    # the theme toggle overrides the system and is remembered
    d.find_element(By.ID, "theme").click()
    other = "light" if theme == "dark" else "dark"
    check(d.execute_script("return document.documentElement.dataset.effectiveTheme") == other, "the toggle switches the theme")
    d.refresh()
    wait_css(d, "#theme")
    check(d.execute_script("return document.documentElement.dataset.effectiveTheme") == other, "the toggle is remembered")
    d.find_element(By.ID, "theme").click()
    d.find_element(By.ID, "theme").click()
    check(d.execute_script("return localStorage.getItem('tae-theme')") is None, "a third click goes back to auto")
    collect(d, js_errors, "misc")


if __name__ == "__main__":
    main()
