"""What the Python benchmarks share to drive a real taed from outside: taectl, the dashboard's
HTTP API on one kept-alive connection, and taed's memory from /proc. Standard library only."""
import http.client
import os
import subprocess
import sys
import time


def taectl(bin_dir, home, *args, timeout=600):
    """`taectl --home HOME ARGS`'s stdout; exits the benchmark when it fails."""
    p = subprocess.run([os.path.join(bin_dir, "taectl"), "--home", home, *args],
                       capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        sys.exit(f"taectl {' '.join(args)}: exit {p.returncode}\n{p.stdout}{p.stderr}")
    return p.stdout


def drop_caches():
    """The page cache dropped (root): what a freshly booted machine reads from."""
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def taed_status_mb(home, field):
    """A /proc/PID/status field of the home's taed (VmRSS, VmHWM) in MB."""
    pid = open(os.path.join(home, "taed.pid")).read().split()[0]
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def rss_mb(home):
    return taed_status_mb(home, "VmRSS")


class Client:
    """A signed-in dashboard session (the URL `taectl ui` prints)."""

    def __init__(self, url, timeout=120):
        base, token = url.split("/?token=")
        self.conn = http.client.HTTPConnection(base.split("//")[1], timeout=timeout)
        self.conn.request("GET", "/?token=" + token.split("#")[0])
        r = self.conn.getresponse()
        r.read()
        self.cookie = r.getheader("Set-Cookie").split(";")[0]

    def get(self, path):
        self.conn.request("GET", path, headers={"Cookie": self.cookie})
        r = self.conn.getresponse()
        body = r.read()
        if r.status != 200:
            sys.exit(f"GET {path}: {r.status} {body[:300]}")
        return body


def timed(fn):
    """(seconds fn took, what it returned)."""
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out
