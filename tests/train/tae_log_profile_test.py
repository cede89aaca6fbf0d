#!/usr/bin/python3
"""tae_log's profiles on demand (agent/python/tae_log.py), with this script as the agent: a
request is profiled once for its steps and answered on TAE_METRICS_FD with a Chrome trace in
TAE_PROFILE_DIR, malformed requests get one error each, profile(at=...) profiles on the job's
own initiative, and outside TAE profile() does nothing.

usage: tae_log_profile_test.py PYTHON_DIR     (PYTHON_DIR holds tae_log.py; exit 77 when torch
                                               cannot be imported)
"""

import json
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

try:
    import torch  # noqa: F401 - the children train with it
except ImportError:
    print("skipped: this python3 cannot import torch (apt-get install python3-torch)")
    sys.exit(77)

PYTHON_DIR = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else ""

# The job: a small model trained step by step under tae_log.profile(). Before the steps named
# in WAITS it waits for a file of the test's, so the test (the agent) can act between steps
# without racing it; every step ends with a metric line the test sees.
JOB = r"""
import json, os, sys, time
import torch
import tae_log

waits = {int(k): v for k, v in json.loads(os.environ["JOB_WAITS"]).items()}
at = [int(s) for s in os.environ.get("JOB_AT", "").split(",") if s]
sleep = float(os.environ.get("JOB_SLEEP", "0"))
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(int(os.environ["JOB_STEPS"])):
    if step in waits:
        deadline = time.monotonic() + 15
        while not os.path.exists(waits[step]):
            if time.monotonic() > deadline:
                sys.exit(f"job: no {waits[step]} within 15 s")
            time.sleep(0.002)
    with tae_log.profile(step, at=at, steps=3):
        x = torch.randn(8, 16)
        loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(sleep)
    tae_log.log(step=step, loss=loss.item())
"""


def write_atomically(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


class Job:
    """The job as a subprocess, its metric lines read from a pipe as the agent reads them."""

    def __init__(self, workdir, env, script=JOB, tae=True):
        self.read_fd, write_fd = os.pipe()
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("TAE_")}
        full_env.update(env, PYTHONPATH=PYTHON_DIR)
        if tae:
            full_env["TAE_METRICS_FD"] = str(write_fd)
        self.log = open(os.path.join(workdir, "job.log"), "w+")
        self.process = subprocess.Popen([sys.executable, "-c", script], env=full_env,
                                        pass_fds=(write_fd,), cwd=workdir, stdout=self.log,
                                        stderr=subprocess.STDOUT)
        os.close(write_fd)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.read_fd, selectors.EVENT_READ)
        self.buffer = b""
        self.lines = []  # every record read so far
        self.eof = False

    def next(self, deadline):
        """The next record, or None at the end of the stream."""
        while b"\n" not in self.buffer:
            if self.eof:
                return None
            if not self.selector.select(max(0, deadline - time.monotonic())):
                raise AssertionError(f"the job said nothing in time; its log:\n{self.output()}")
            chunk = os.read(self.read_fd, 65536)
            self.eof = not chunk
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        self.lines.append(json.loads(line))
        return self.lines[-1]

    def until(self, predicate, timeout=20):
        deadline = time.monotonic() + timeout
        while True:
            record = self.next(deadline)
            if record is None:
                raise AssertionError(f"the stream ended first; the job's log:\n{self.output()}")
            if predicate(record):
                return record

    def finish(self, timeout=20):
        deadline = time.monotonic() + timeout
        while self.next(deadline) is not None:
            pass
        self.process.wait(max(1, deadline - time.monotonic()))
        return self.process.returncode

    def close(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.selector.close()
        os.close(self.read_fd)
        self.log.close()

    def output(self):
        self.log.seek(0)
        return self.log.read()[-3000:]

    def profiles(self):
        return [r["profile"] for r in self.lines if "profile" in r]


def at_step(n):
    return lambda record: record.get("step") == n and "loss" in record


def is_profile(record):
    return "profile" in record


class ProfileTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tae_log_profile_")
        self.addCleanup(shutil.rmtree, self.dir)
        self.profile_dir = os.path.join(self.dir, "profile")
        self.request = os.path.join(self.dir, "request.json")
        os.mkdir(self.profile_dir)

    def path(self, name):
        return os.path.join(self.dir, name)

    def job(self, steps, waits=None, at="", sleep=0.0, script=JOB, tae=True):
        env = {"JOB_STEPS": str(steps), "JOB_WAITS": json.dumps(waits or {}), "JOB_AT": at,
               "JOB_SLEEP": str(sleep)}
        if tae:
            env.update(TAE_PROFILE_DIR=self.profile_dir, TAE_PROFILE_REQUEST=self.request)
        job = Job(self.dir, env, script, tae)
        self.addCleanup(job.close)
        return job

    def take_profile(self, name):
        """What the agent does with a finished profile: the files leave TAE_PROFILE_DIR."""
        taken = self.path(name)
        shutil.move(self.profile_dir, taken)
        os.mkdir(self.profile_dir)
        return taken

    def check_trace(self, directory, steps):
        with open(os.path.join(directory, "trace.json")) as f:
            trace = json.load(f)
        events = trace["traceEvents"] if isinstance(trace, dict) else trace
        self.assertIsInstance(events, list)
        complete = {e.get("name") for e in events if e.get("ph") == "X"}
        self.assertTrue(complete & {"aten::addmm", "aten::mm", "aten::linear"},
                        sorted(complete)[:40])
        for step in steps:  # each profiled step is marked, as torch.profiler.step() would
            self.assertIn(f"ProfilerStep#{step}", complete)
        self.assertNotIn(f"ProfilerStep#{steps[-1] + 1}", complete)
        with open(os.path.join(directory, "key_averages.txt")) as f:
            self.assertIn("aten::addmm", f.read())

    def check_done(self, profile, profile_id, step, steps):
        self.assertEqual(set(profile), {"id", "time", "step", "steps", "tool"}, profile)
        self.assertEqual((profile["id"], profile["step"], profile["steps"], profile["tool"]),
                         (profile_id, step, steps, "torch.profiler"))
        self.assertLess(abs(profile["time"] - time.time()), 60)

    def test_requests_once_each_malformed_ones_answered_and_at(self):
        job = self.job(50, waits={1: self.request, 10: self.path("go1"),
                                  20: self.path("go2"), 30: self.path("go3")}, at="40")
        # A request while the job runs (which waits for it before step 1): the steps from the
        # first to begin after it are profiled.
        job.until(at_step(0))
        self.assertEqual(os.listdir(self.profile_dir), [])
        write_atomically(self.request, '{"id": "p3", "steps": 5, "seconds": 0}')
        done = job.until(is_profile)["profile"]
        self.check_done(done, "p3", 1, 5)
        self.check_trace(self.take_profile("p3"), [1, 2, 3, 4, 5])
        # The request file stays for ten more steps; it is not profiled again.
        open(self.path("go1"), "w").close()
        job.until(at_step(19))
        self.assertEqual(os.listdir(self.profile_dir), [])
        # Malformed requests: each answered once with an error, the file staying.
        write_atomically(self.request, '{"id": "p4", "steps": 5')
        open(self.path("go2"), "w").close()
        job.until(at_step(29))
        write_atomically(self.request, '{"id": "p5", "steps": 5, "seconds": 1.5}')
        open(self.path("go3"), "w").close()
        # profile(at=[40], steps=3): the job's own profile of steps 40-42.
        self.assertEqual(job.finish(), 0, job.output())
        profiles = job.profiles()
        self.assertEqual(len(profiles), 4, profiles)
        self.assertEqual(profiles[1]["id"], "malformed")
        self.assertIn("not JSON", profiles[1]["error"])
        self.assertEqual(profiles[2]["id"], "p5")
        self.assertIn("exactly one of", profiles[2]["error"])
        for error in profiles[1:3]:
            self.assertEqual(set(error), {"id", "time", "error"})
        self.check_done(profiles[3], "step40", 40, 3)
        self.check_trace(self.profile_dir, [40, 41, 42])
        # Each answer comes as its last step's profile() exits: just before that step's line.
        order = [r["profile"]["id"] if "profile" in r else r["step"] for r in job.lines]
        self.assertEqual(order.index("p3") + 1, order.index(5))
        self.assertEqual(order.index("step40") + 1, order.index(42))

    def test_seconds(self):
        write_atomically(self.request, '{"id": "p6", "steps": 0, "seconds": 0.15}')
        job = self.job(60, sleep=0.01)
        self.assertEqual(job.finish(), 0, job.output())
        [done] = job.profiles()
        self.assertEqual((done["id"], done["step"]), ("p6", 0))
        self.assertTrue(1 <= done["steps"] <= 15, done)  # 0.15 s of steps of >= 10 ms
        self.check_trace(self.profile_dir, list(range(done["steps"])))

    def test_a_request_waits_for_the_agent_to_take_the_last_profile(self):
        open(os.path.join(self.profile_dir, "left.json"), "w").close()
        write_atomically(self.request, '{"id": "p7", "steps": 2, "seconds": 0}')
        job = self.job(10, waits={5: self.path("go")})
        job.until(at_step(4))
        self.assertEqual(job.profiles(), [])
        os.remove(os.path.join(self.profile_dir, "left.json"))
        open(self.path("go"), "w").close()
        self.assertEqual(job.finish(), 0, job.output())
        [done] = job.profiles()
        self.check_done(done, "p7", 5, 2)

    def test_without_a_profiler_the_request_is_refused(self):
        write_atomically(self.request, '{"id": "p8", "steps": 2, "seconds": 0}')
        script = ("import sys\nsys.modules['torch'] = None\nimport tae_log\n"
                  "for step in range(5):\n    with tae_log.profile(step):\n        pass\n")
        job = self.job(5, script=script)
        self.assertEqual(job.finish(), 0, job.output())
        [refusal] = job.profiles()
        self.assertEqual((refusal["id"], refusal["error"]),
                         ("p8", "no profiler importable (torch, torch_xla, jax)"))
        self.assertEqual(os.listdir(self.profile_dir), [])

    def test_outside_tae_profile_does_nothing(self):
        write_atomically(self.request, '{"id": "p9", "steps": 2, "seconds": 0}')
        script = r"""
import contextlib, os, sys, time
import tae_log
assert tae_log.profile_requested() is None
# Cheap: CPU time (not wall time, which a loaded machine stretches) against the same loop around
# a do-nothing context manager. A profile() that looked for its request or wrote anything each
# step would cost hundreds of times more.
def cpu_seconds(make):
    start = time.process_time()
    for step in range(100000):
        with make(step):
            pass
    return time.process_time() - start
baseline = cpu_seconds(lambda step: contextlib.nullcontext())
took = cpu_seconds(lambda step: tae_log.profile(step, at=[1, 2]))
assert took < 10 * baseline + 0.05, (
    f"100000 empty profiled steps took {took:.3f} s of CPU, against {baseline:.3f} s bare")
assert tae_log.profile(1) is tae_log.profile(2)
print("ok", file=sys.stderr)
"""
        # TAE_PROFILE_DIR and TAE_PROFILE_REQUEST are not set, nor TAE_METRICS_FD.
        job = self.job(0, script=script, tae=False)
        self.assertEqual(job.finish(), 0, job.output())
        self.assertEqual(job.output(), "ok\n")
        self.assertEqual(job.lines, [])
        self.assertEqual(sorted(os.listdir(self.dir)), ["job.log", "profile", "request.json"])
        self.assertEqual(os.listdir(self.profile_dir), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
