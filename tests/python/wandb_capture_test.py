#!/usr/bin/env python3
"""The wandb stand-in (agent/python/tae_wandb/wandb) as a training script meets it: small scripts
run in child processes with PYTHONPATH=AGENT_PYTHON_DIR/tae_wandb:AGENT_PYTHON_DIR and
TAE_METRICS_FD naming a file, and the JSON lines they write are checked, step by step and value
by value, against the contract in the module's docstring.

usage: wandb_capture_test.py [AGENT_PYTHON_DIR]     (default: agent/python)

Checks: wandb's step numbering (plain log, commit=False, explicit steps, a lower step ignored with
a warning); define_metric's step_metric (same row, step_sync from the last value, patterns);
nested keys flattened with '/' and made TAE keys; numbers by duck typing; non-numeric values
skipped with one warning per type; config recorded as facts (attribute, item, update,
setdefaults, Namespace, allow_val_change); summary keys as points at the last step at finish()
and at exit without it; a pending row committed at exit; reinit; run properties from TAE_RUN_ID
and TAE_RUN_DIR; mode="disabled"; the ignored API; `import wandb` with no network and without
site-packages (so no real wandb).
"""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

AGENT_PYTHON = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "agent/python")
STAND_IN = os.path.join(AGENT_PYTHON, "tae_wandb")
del sys.argv[1:]

INIT_LINE = "wandb (TAE capture): metrics go to TAE; nothing is sent to W&B"


class Result:
    """What one child wrote: its JSON lines, its points and facts, stdout and stderr."""

    def __init__(self, rc, stdout, stderr, lines):
        self.rc, self.stdout, self.stderr, self.lines = rc, stdout, stderr, lines
        self.points = []  # (step, key, value) in line order
        self.meta = {}    # the facts, later lines replacing earlier ones
        self.rows = []    # the metric lines, each a dict
        for line in lines:
            if "meta" in line:
                self.meta.update(line["meta"])
                continue
            self.rows.append(line)
            for key, value in line.items():
                if key != "step":
                    self.points.append((line["step"], key, value))

    def stderr_lines(self):
        return [line for line in self.stderr.splitlines() if line]

    def count(self, text):
        return sum(text in line for line in self.stderr_lines())


def run_script(source, env=None, python_flags=(), expect_rc=0, metrics_fd=True):
    """Runs source with the stand-in on PYTHONPATH; returns its Result."""
    with tempfile.TemporaryDirectory(prefix="tae-wandb-") as tmp:
        script = os.path.join(tmp, "train.py")
        with open(script, "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(source))
        child_env = {k: v for k, v in os.environ.items()
                     if not k.startswith(("TAE_", "WANDB_")) and k != "PYTHONPATH"}
        child_env["PYTHONPATH"] = os.pathsep.join([STAND_IN, AGENT_PYTHON])
        child_env["PYTHONDONTWRITEBYTECODE"] = "1"  # nothing written into the source tree
        child_env.update(env or {})
        path = os.path.join(tmp, "metrics.jsonl")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            if metrics_fd:
                child_env["TAE_METRICS_FD"] = str(fd)
            p = subprocess.run([sys.executable, *python_flags, script], env=child_env, cwd=tmp,
                               pass_fds=(fd,), capture_output=True, text=True, timeout=120)
        finally:
            os.close(fd)
        with open(path, encoding="utf-8") as f:
            lines = [json.loads(line) for line in f if line.strip()]
    result = Result(p.returncode, p.stdout, p.stderr, lines)
    if p.returncode != expect_rc:
        raise AssertionError(f"exit {p.returncode}, expected {expect_rc}\nstdout:\n{p.stdout}\n"
                             f"stderr:\n{p.stderr}")
    return result


class StepTest(unittest.TestCase):
    """wandb's step numbering."""

    def test_plain_log_increments_the_step(self):
        r = run_script("""
            import wandb
            run = wandb.init(project="p")
            for i in range(3):
                wandb.log({"loss": 1.0 + i})
            print(run.step, wandb.run is run)
            wandb.finish()
            print(wandb.run)
        """)
        self.assertEqual(r.points, [(0, "loss", 1.0), (1, "loss", 2.0), (2, "loss", 3.0)])
        self.assertEqual(r.stdout.split(), ["3", "True", "None"])
        self.assertEqual(r.count(INIT_LINE), 1)
        self.assertEqual(r.stderr_lines(), [INIT_LINE])

    def test_run_log_and_commit_false_land_with_the_next_commit(self):
        r = run_script("""
            import wandb
            run = wandb.init()
            run.log({"a": 1}, commit=False)
            run.log({"a": 5, "b": 2}, commit=False)
            print(run.step)
            wandb.log({"c": 3})
            wandb.log({"d": 4}, commit=False)
            wandb.log({}, commit=True)
            wandb.log({"e": 5})
        """)
        self.assertEqual(r.rows, [{"step": 0, "a": 5.0, "b": 2.0, "c": 3.0},
                                  {"step": 1, "d": 4.0}, {"step": 2, "e": 5.0}])
        self.assertEqual(r.stdout.split(), ["0"])

    def test_explicit_steps(self):
        r = run_script("""
            import wandb
            run = wandb.init()
            wandb.log({"a": 1})                    # step 0
            wandb.log({"b": 2}, commit=False)      # pending at 1
            wandb.log({"c": 3}, step=10)           # commits b at 1; c waits at 10
            print(run.step)
            wandb.log({"d": 4}, step=10)           # same row
            wandb.log({"e": 5})                    # commits the row at 10
            wandb.log({"f": 6})                    # 11
            wandb.log({"g": 7}, step=20, commit=True)
            print(run.step)
            wandb.log({"h": 8}, step=30)           # waits; committed at exit
        """)
        self.assertEqual(r.rows, [{"step": 0, "a": 1.0}, {"step": 1, "b": 2.0},
                                  {"step": 10, "c": 3.0, "d": 4.0, "e": 5.0},
                                  {"step": 11, "f": 6.0}, {"step": 20, "g": 7.0},
                                  {"step": 30, "h": 8.0}])
        self.assertEqual(r.stdout.split(), ["10", "21"])

    def test_numpy_like_steps(self):
        r = run_script("""
            import wandb
            class Int:                              # a numpy integer's protocol
                def __index__(self):
                    return 7
            wandb.init()
            wandb.log({"a": 1}, step=Int(), commit=True)
            wandb.log({"a": 2}, step=9.0, commit=True)
            try:
                wandb.log({"a": 3}, step=9.5)
            except ValueError as e:
                print("refused")
        """)
        self.assertEqual(r.points, [(7, "a", 1.0), (9, "a", 2.0)])
        self.assertEqual(r.stdout.split(), ["refused"])

    def test_a_lower_step_is_ignored_with_one_warning(self):
        r = run_script("""
            import wandb
            run = wandb.init()
            wandb.log({"a": 1}, step=5, commit=True)   # the step is now 6
            wandb.log({"p": 1}, commit=False)
            wandb.log({"a": 2}, step=3)                 # ignored: pending row untouched
            print(run.step)
            wandb.log({"q": 2})                         # commits p and q at 6
            wandb.log({"a": 4}, step=6)                 # 6 < 7: ignored
        """)
        self.assertEqual(r.rows, [{"step": 5, "a": 1.0}, {"step": 6, "p": 1.0, "q": 2.0}])
        self.assertEqual(r.stdout.split(), ["6"])
        self.assertEqual(r.count("step 3 is less than the current step 6"), 1)
        self.assertEqual(r.count("step 6 is less than the current step 7"), 1)
        self.assertEqual(r.count("is less than the current step"), 2)

    def test_a_pending_row_is_committed_at_exit(self):
        r = run_script("""
            import wandb
            wandb.init()
            wandb.log({"a": 1})
            wandb.log({"b": 2}, commit=False)
            wandb.log({"b": 3}, commit=False)
        """)
        self.assertEqual(r.rows, [{"step": 0, "a": 1.0}, {"step": 1, "b": 3.0}])

    def test_an_exception_still_commits_the_pending_row(self):
        r = run_script("""
            import wandb
            wandb.init()
            wandb.log({"loss": 2.5}, step=4)
            raise RuntimeError("diverged")
        """, expect_rc=1)
        self.assertEqual(r.rows, [{"step": 4, "loss": 2.5}])
        self.assertIn("RuntimeError: diverged", r.stderr)


class DefineMetricTest(unittest.TestCase):

    def test_step_metric(self):
        r = run_script("""
            import wandb
            wandb.init()
            wandb.define_metric("epoch")
            wandb.define_metric("val/*", step_metric="epoch")
            m = wandb.define_metric("test acc", step_metric="epoch", step_sync=False)
            print(m.name, m.step_metric)
            wandb.log({"train/loss": 0.5})                   # 0
            wandb.log({"train/loss": 0.4})                   # 1
            wandb.log({"val/acc": 0.7, "epoch": 1})          # 2: val/acc at epoch 1
            wandb.log({"epoch": 2})                          # 3
            wandb.log({"val/acc": 0.8, "test acc": 0.6})     # 4: step_sync: epoch 2; no sync
            wandb.log({"val": 1.0, "valx/a": 2.0})           # 5: match no pattern
            wandb.log({"val/acc": 0.9, "epoch": 2.5})        # 6: not a step: wandb step
            wandb.log({"val/acc": 0.95, "epoch": 3})         # 7: at 3
        """)
        self.assertEqual(r.stdout.split(), ["test_acc", "epoch"])
        self.assertEqual(r.points, [
            (0, "train/loss", 0.5), (1, "train/loss", 0.4),
            (1, "val/acc", 0.7), (2, "epoch", 1.0),
            (3, "epoch", 2.0),
            (2, "val/acc", 0.8), (4, "test_acc", 0.6),
            (5, "val", 1.0), (5, "valx/a", 2.0),
            (6, "val/acc", 0.9), (6, "epoch", 2.5),
            (3, "val/acc", 0.95), (7, "epoch", 3.0)])
        self.assertEqual(r.count("step_metric 'epoch' = 2.5 is not an integer >= 0"), 1)

    def test_a_catch_all_pattern_and_exact_names_first(self):
        # transformers' WandbCallback: define_metric("*", step_metric="train/global_step").
        r = run_script("""
            import wandb
            run = wandb.init()
            run.define_metric("train/global_step")          # exact, no step_metric
            run.define_metric("eval/*", step_metric="eval_round")
            run.define_metric("*", step_metric="train/global_step", step_sync=True)
            run.define_metric("eval/exact")                 # an exact name: the wandb step
            wandb.log({"train/loss": 1.5, "train/global_step": 100})
            wandb.log({"eval/loss": 1.2, "eval/exact": 3, "eval_round": 2})
            wandb.log({"lr": 0.1})                           # synced: 100
        """)
        self.assertEqual(r.points, [
            (100, "train/loss", 1.5), (0, "train/global_step", 100.0),
            (2, "eval/loss", 1.2), (1, "eval/exact", 3.0), (100, "eval_round", 2.0),
            (100, "lr", 0.1)])
        # one line per step a row's points go to, in the order of their first key
        self.assertEqual(r.rows[2:5], [{"step": 2, "eval/loss": 1.2},
                                       {"step": 1, "eval/exact": 3.0},
                                       {"step": 100, "eval_round": 2.0}])


class ValueTest(unittest.TestCase):

    def test_nested_dicts_and_keys(self):
        r = run_script("""
            import wandb
            wandb.init()
            wandb.log({"a": {"b": 1, "c": {"d": 2}}, "e f": 3, "g=h": 4, "step": 5,
                       "meta": 6, "caf\\u00e9": 7, "k" * 200: 8})
        """)
        self.assertEqual(r.rows, [{"step": 0, "a/b": 1.0, "a/c/d": 2.0, "e_f": 3.0,
                                   "g_h": 4.0, "step_": 5.0, "meta_": 6.0, "caf_": 7.0,
                                   "k" * 128: 8.0}])

    def test_numbers_by_duck_typing(self):
        r = run_script("""
            import decimal, fractions, wandb
            class Scalar:                         # numpy/torch scalars: .item()
                def __init__(self, v):
                    self.v = v
                def item(self):
                    return self.v
            class Tensor:                         # a tensor of many elements
                def item(self):
                    raise RuntimeError("a Tensor with 4 elements cannot be converted")
            class Floaty:                         # no .item(), but float()
                def __float__(self):
                    return 0.25
            wandb.init()
            wandb.log({"t": True, "f": False, "i": 3, "x": 1.5, "np": Scalar(2.5),
                       "npb": Scalar(True), "npi": Scalar(4), "many": Tensor(),
                       "fl": Floaty(), "dec": decimal.Decimal("0.5"),
                       "fr": fractions.Fraction(1, 4), "nan": float("nan"),
                       "inf": float("inf"), "big": 10 ** 400, "s": "1.5"})
        """)
        self.assertEqual(r.rows, [{"step": 0, "t": 1.0, "f": 0.0, "i": 3.0, "x": 1.5,
                                   "np": 2.5, "npb": 1.0, "npi": 4.0, "fl": 0.25, "dec": 0.5,
                                   "fr": 0.25, "nan": "nan", "inf": "inf", "big": "inf"}])
        self.assertEqual(r.count("skipping __main__.Tensor values such as 'many'"), 1)
        self.assertEqual(r.count("skipping str values such as 's'"), 1)

    def test_non_numeric_values_are_skipped_with_one_warning_per_type(self):
        r = run_script("""
            import wandb
            wandb.init()
            wandb.log({"note": "hi", "loss": 1.0})
            wandb.log({"note": "again", "img": wandb.Image(None), "other": "x",
                       "img2": wandb.Image(None), "hist": [1, 2], "loss": 0.5})
            wandb.log({"chart": wandb.plot.line(None, "x", "y"), "none": None})
        """)
        self.assertEqual(r.points, [(0, "loss", 1.0), (1, "loss", 0.5)])
        self.assertEqual(r.rows[-1], {"step": 1, "loss": 0.5})
        self.assertEqual(r.count("skipping"), 5)
        self.assertEqual(r.count(
            "wandb (TAE capture): skipping str values such as 'note'; TAE records numbers"), 1)
        self.assertEqual(r.count("skipping wandb.Image values such as 'img';"), 1)
        self.assertEqual(r.count("skipping list values such as 'hist';"), 1)
        self.assertEqual(r.count("skipping wandb.plot.line values such as 'chart';"), 1)
        self.assertEqual(r.count("skipping NoneType values such as 'none';"), 1)
        self.assertEqual(r.count("wandb.Image is ignored"), 1)
        self.assertEqual(r.count("wandb.plot.line is ignored"), 1)


class ConfigTest(unittest.TestCase):

    def test_config_keys_are_facts(self):
        r = run_script("""
            import argparse, wandb
            run = wandb.init(project="lm", config={"lr": 0.1, "model": {"layers": 2},
                                                   "--batch size": 32})
            wandb.config.wd = 0.01
            run.config["dropout"] = 0.2
            wandb.config.update({"epochs": 3})
            wandb.config.update(argparse.Namespace(seed=7, opt="adam"))
            wandb.config.setdefaults({"lr": 5, "warmup": 10})
            wandb.config.lr = 0.1                              # the same value: fine
            try:
                wandb.config.update({"epochs": 4})
            except wandb.errors.ConfigError:
                print("refused")
            wandb.config.update({"epochs": 5}, allow_val_change=True)
            c = wandb.config
            print(c.lr, c["model"]["layers"], c["batch size"], "wd" in c, "nope" in c,
                  c.get("nope", "dflt"), len(c), c.as_dict()["epochs"], dict(c)["seed"])
            print(sorted(c.keys()))
            print(sorted(k for k, v in c.items()))
            try:
                c.nope
            except AttributeError:
                print("no attribute")
        """)
        self.assertEqual(r.stdout.splitlines(), [
            "refused",
            "0.1 2 32 True False dflt 9 5 7",
            str(sorted(["lr", "model", "batch size", "wd", "dropout", "epochs", "seed", "opt",
                        "warmup"])),
            str(sorted(["lr", "model", "batch size", "wd", "dropout", "epochs", "seed", "opt",
                        "warmup"])),
            "no attribute"])
        config = {k: v for k, v in r.meta.items() if k.startswith("wandb.config.")}
        self.assertEqual(config, {
            "wandb.config.lr": "0.1", "wandb.config.model.layers": "2",
            "wandb.config.batch_size": "32", "wandb.config.wd": "0.01",
            "wandb.config.dropout": "0.2", "wandb.config.epochs": "5",
            "wandb.config.seed": "7", "wandb.config.opt": "adam",
            "wandb.config.warmup": "10"})
        self.assertEqual(r.meta["wandb.project"], "lm")
        self.assertEqual(r.points, [])
        # the value 4 was refused, so never recorded; 3 was, before 5 replaced it
        epochs = [line["meta"]["wandb.config.epochs"] for line in r.lines
                  if "wandb.config.epochs" in line.get("meta", {})]
        self.assertEqual(epochs, ["3", "5"])

    def test_config_from_a_namespace_and_an_object(self):
        r = run_script("""
            import argparse, wandb
            class Hparams:
                def __init__(self):
                    self.width = 64
                    self.names = ["a", "b"]
            wandb.init(config=argparse.Namespace(lr=3e-4, steps=1000))
            print(wandb.config.lr, wandb.config.steps)
            wandb.init(reinit=True, config=Hparams(), config_exclude_keys=["names"])
            print(sorted(wandb.config.keys()))
        """)
        self.assertEqual(r.stdout.splitlines(), ["0.0003 1000", "['width']"])
        self.assertEqual(r.meta["wandb.config.lr"], "0.0003")
        self.assertEqual(r.meta["wandb.config.steps"], "1000")
        self.assertEqual(r.meta["wandb.config.width"], "64")
        self.assertNotIn("wandb.config.names", r.meta)

    def test_config_and_log_before_init_raise(self):
        r = run_script("""
            import wandb
            for use in (lambda: wandb.config.lr, lambda: wandb.log({"a": 1}),
                        lambda: wandb.summary.update({})):
                try:
                    use()
                except wandb.errors.UsageError as e:
                    print("UsageError")
        """)
        self.assertEqual(r.stdout.split(), ["UsageError"] * 3)
        self.assertEqual(r.lines, [])


class SummaryTest(unittest.TestCase):

    def test_summary_at_finish(self):
        r = run_script("""
            import wandb
            run = wandb.init()
            wandb.define_metric("val/*", step_metric="epoch")
            for i in range(3):
                wandb.log({"loss": 1.0 - i / 10})
            wandb.log({"val/acc": 0.5, "epoch": 4})
            print(run.summary["loss"], "loss" in wandb.summary)
            run.summary["best"] = 0.9
            wandb.summary.update({"final": {"loss": 2}, "note": "ok"})
            wandb.summary.val_best = 0.75
            wandb.summary.skipped = [1, 2]
            print(wandb.summary.best)
            run.finish()
            run.finish()
        """)
        self.assertEqual(r.stdout.split(), ["0.8", "True", "0.9"])
        self.assertEqual(r.rows[:5], [{"step": 0, "loss": 1.0}, {"step": 1, "loss": 0.9},
                                      {"step": 2, "loss": 0.8}, {"step": 4, "val/acc": 0.5},
                                      {"step": 3, "epoch": 4.0}])
        self.assertEqual(r.rows[5:], [{"step": 3, "best": 0.9, "final/loss": 2.0,
                                       "val_best": 0.75}])
        self.assertEqual({k: v for k, v in r.meta.items() if k.startswith("wandb.summary.")},
                         {"wandb.summary.best": "0.9", "wandb.summary.final/loss": "2",
                          "wandb.summary.note": "ok", "wandb.summary.val_best": "0.75"})
        self.assertEqual(r.count("skipping list values such as 'skipped'"), 1)

    def test_summary_of_a_step_metric_goes_to_its_last_value(self):
        r = run_script("""
            import wandb
            wandb.init()
            wandb.define_metric("val/*", step_metric="epoch")
            wandb.log({"val/acc": 0.5, "epoch": 2})
            wandb.log({"train/loss": 0.1})
            wandb.summary["val/acc"] = 0.6
            wandb.finish()
        """)
        self.assertEqual(r.points, [(2, "val/acc", 0.5), (0, "epoch", 2.0),
                                    (1, "train/loss", 0.1), (2, "val/acc", 0.6)])

    def test_summary_and_pending_row_at_exit_without_finish(self):
        r = run_script("""
            import wandb
            run = wandb.init()
            wandb.log({"loss": 3.0})
            wandb.log({"loss": 2.0}, step=7)
            run.summary["best_loss"] = 2.0
            print("done")
        """)
        self.assertEqual(r.stdout.split(), ["done"])
        self.assertEqual(r.rows, [{"step": 0, "loss": 3.0}, {"step": 7, "loss": 2.0},
                                  {"step": 7, "best_loss": 2.0}])
        self.assertEqual(r.meta["wandb.summary.best_loss"], "2.0")

    def test_context_manager_finishes(self):
        r = run_script("""
            import wandb
            with wandb.init() as run:
                wandb.log({"a": 1}, commit=False)
                run.summary["s"] = 5
            print(wandb.run)
            wandb.log({"a": 2})
        """, expect_rc=1)
        self.assertEqual(r.rows, [{"step": 0, "a": 1.0}, {"step": 0, "s": 5.0}])
        self.assertEqual(r.stdout.split(), ["None"])
        self.assertIn("UsageError: You must call wandb.init() before wandb.log()", r.stderr)


class RunTest(unittest.TestCase):

    def test_reinit(self):
        r = run_script("""
            import wandb
            first = wandb.init(name="one")
            wandb.log({"a": 1})
            wandb.log({"a": 2}, commit=False)
            first.summary["s"] = 1
            same = wandb.init(name="ignored")
            print(same is first, same.name)
            second = wandb.init(name="two", reinit=True)
            print(second is first, wandb.run is second, second.step, second.name)
            first.log({"late": 1})
            wandb.log({"b": 3})
            wandb.finish()
        """)
        self.assertEqual(r.stdout.splitlines(), ["True one", "False True 0 two"])
        self.assertEqual(r.rows, [{"step": 0, "a": 1.0}, {"step": 1, "a": 2.0},
                                  {"step": 1, "s": 1.0}, {"step": 0, "b": 3.0}])
        self.assertEqual(r.meta["wandb.name"], "two")
        self.assertEqual(r.count("is finished; its log() calls are ignored"), 1)
        self.assertEqual(r.count(INIT_LINE), 1)

    def test_run_properties(self):
        r = run_script("""
            import os, wandb
            run = wandb.init(project="lm", group="g", tags=["a", "b"])
            print(run.id, run.name, run.project, run.dir == os.environ["TAE_RUN_DIR"])
            wandb.finish()
            run = wandb.init(id="given", name="n")
            print(run.id, run.name)
        """, env={"TAE_RUN_ID": "4711", "TAE_RUN_DIR": os.getcwd()})
        self.assertEqual(r.stdout.splitlines(), ["4711 4711 lm True", "given n"])
        facts = [line["meta"] for line in r.lines if "wandb.id" in line.get("meta", {})]
        self.assertEqual(facts, [
            {"wandb.project": "lm", "wandb.name": "4711", "wandb.id": "4711",
             "wandb.group": "g", "wandb.tags": "a,b"},
            {"wandb.project": "uncategorized", "wandb.name": "n", "wandb.id": "given"}])

    def test_random_id_and_working_directory(self):
        r = run_script("""
            import os, wandb
            run = wandb.init()
            print(run.id, run.dir == os.getcwd())
        """)
        run_id, cwd = r.stdout.split()
        self.assertEqual(len(run_id), 8)
        self.assertTrue(run_id.isalnum() and run_id == run_id.lower(), run_id)
        self.assertEqual(cwd, "True")

    def test_disabled_mode_records_nothing(self):
        r = run_script("""
            import wandb
            run = wandb.init(mode="disabled", config={"lr": 1})
            wandb.log({"a": 1})
            run.summary["s"] = 2
            print(run.step, wandb.config.lr)
        """)
        self.assertEqual(r.lines, [])
        self.assertEqual(r.stdout.split(), ["1", "1"])
        self.assertEqual(r.count("mode='disabled': this run records nothing"), 1)

    def test_outside_tae_points_go_to_stdout(self):
        r = run_script("""
            import wandb
            wandb.init()
            wandb.log({"loss": 0.5})
        """, metrics_fd=False)
        self.assertEqual(r.lines, [])
        self.assertEqual(r.stdout.splitlines(), ["step=0 loss=0.5"])


class ImportTest(unittest.TestCase):

    def test_import_without_network_or_installed_wandb(self):
        # -S: no site-packages, so a real wandb could not be found; sockets refuse to open.
        r = run_script("""
            import socket
            def refuse(*args, **kwargs):
                raise AssertionError("network used")
            socket.socket = refuse
            socket.create_connection = refuse
            socket.getaddrinfo = refuse
            import sys
            import wandb
            import wandb.errors, wandb.util, wandb.plot
            from wandb.errors import CommError, UsageError
            print(wandb.__file__.endswith("tae_wandb/wandb/__init__.py"), wandb.__version__)
            print(wandb.login(key="x"), wandb.Error is wandb.errors.Error,
                  issubclass(CommError, wandb.Error), issubclass(UsageError, Exception))
            run = wandb.init(project="p", settings=wandb.Settings(start_method="thread"),
                             resume="allow", entity="e", dir="/nonexistent", mode="offline")
            wandb.watch(object(), log="all")
            wandb.watch(object())
            run.watch(object())
            wandb.save("*.pt")
            wandb.alert(title="t", text="x")
            art = wandb.Artifact("model", type="model")
            art.add_file(__file__)
            with art.new_file("notes.txt") as f:
                f.write("x")
            print(run.log_artifact(art) is art)
            used = wandb.use_artifact("data:latest")
            try:
                used.download()
            except CommError:
                print("no download")
            table = wandb.Table(columns=["a"])
            table.add_data(1)
            wandb.log({"table": table, "hist": wandb.Histogram([1, 2]),
                       "media": [wandb.Video(None), wandb.Audio(None), wandb.Html("x")],
                       "chart": wandb.plot.confusion_matrix(probs=None), "ok": 1})
            print(len(wandb.util.generate_id()), callable(wandb.util.anything))
            wandb.util.anything()
            run._label(code="trainer")
            print(run.get_url(), run.url)
            wandb.finish()
        """, python_flags=("-S",))
        self.assertEqual(r.stdout.splitlines(), [
            "True 0.0.0+tae-capture", "True True True True", "True", "no download",
            "8 True", "None None"])
        self.assertEqual(r.rows, [{"step": 0, "ok": 1.0}])
        for name in ("wandb.watch", "run.watch", "wandb.save", "wandb.alert", "wandb.Artifact",
                     "run.log_artifact", "wandb.use_artifact", "wandb.Table", "wandb.Histogram",
                     "wandb.Video", "wandb.Audio", "wandb.Html", "wandb.Settings",
                     "wandb.plot.confusion_matrix", "wandb.util.anything"):
            self.assertEqual(r.count(f"wandb (TAE capture): {name} is ignored"), 1, name)
        self.assertNotIn("network used", r.stderr)
        self.assertEqual(r.meta["wandb.entity"], "e")


if __name__ == "__main__":
    unittest.main(verbosity=2)
