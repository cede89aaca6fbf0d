#!/usr/bin/env python3
"""examples/notebooks/ablation.ipynb executed as a researcher would run it: a real taed runs the
quickstart study, then Debian's nbclient (python3-nbclient, the python3 kernel of
python3-ipykernel) executes every cell against it, and the outputs are checked: no cell fails, the
table printed is `taectl report`'s, the figure is drawn, the LaTeX is `taectl report --format
latex`'s.

usage: notebook_test.py BIN_DIR PYTHON_DIR BUILD_PYTHON_DIR NOTEBOOK [OUT_DIR]

The executed notebook, outputs included, goes to OUT_DIR: look at it.

Exits 77 (ctest: skipped) with "TAE-SKIPPED: reason" when nbformat, nbclient, ipykernel or pandas
is missing.
"""
import os
import shutil
import subprocess
import sys
import tempfile

BIN, PYTHON_DIR, BUILD_PYTHON_DIR, NOTEBOOK = sys.argv[1:5]
OUT = sys.argv[5] if len(sys.argv) > 5 else None  # the executed notebook is written here


def skip(reason):
    print(f"TAE-SKIPPED: {reason}")
    sys.exit(77)


for module, package in (("nbformat", "python3-nbformat"), ("nbclient", "python3-nbclient"),
                        ("ipykernel", "python3-ipykernel"), ("pandas", "python3-pandas"),
                        ("matplotlib", "python3-matplotlib")):
    try:
        __import__(module)
    except ImportError:
        skip(f"{module} is not installed for {sys.executable} (apt-get install {package})")

import nbclient  # noqa: E402
import nbformat  # noqa: E402


def taectl(home, *args, timeout=600):
    p = subprocess.run([os.path.join(BIN, "taectl"), "--home", home, *args], capture_output=True,
                       text=True, timeout=timeout)
    if p.returncode != 0:
        raise SystemExit(f"taectl {' '.join(args)}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p.stdout


def texts(cell):
    out = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            out.append(output.get("text", ""))
        elif "data" in output:
            out.append(output["data"].get("text/plain", ""))
    return "".join(out)


def main():
    tmp = tempfile.mkdtemp(prefix="tae-notebook-")
    home = os.path.join(tmp, "home")
    examples = os.path.dirname(os.path.dirname(os.path.abspath(NOTEBOOK)))
    try:
        taectl(home, "up", "--agents", "1", "--slots", "2", timeout=120)
        taectl(home, "submit", os.path.join(examples, "quickstart.toml"), "--wait", timeout=900)
        os.environ["TAE_HOME"] = home
        os.environ["XDG_CACHE_HOME"] = os.path.join(tmp, "cache")
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [PYTHON_DIR, BUILD_PYTHON_DIR] + [p for p in [os.environ.get("PYTHONPATH")] if p])
        os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # ipykernel's debugger note, not ours
        nb = nbformat.read(NOTEBOOK, as_version=4)
        work = os.path.join(tmp, "work")
        os.makedirs(work)
        client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                         resources={"metadata": {"path": work}})
        try:
            client.execute()
        except nbclient.exceptions.CellExecutionError as e:
            raise SystemExit(f"a cell of {NOTEBOOK} failed:\n{e}")
        code = [c for c in nb.cells if c.cell_type == "code"]
        failures = []
        table = taectl(home, "report", "quickstart")
        latex = taectl(home, "report", "quickstart", "--format", "latex")
        printed = "\n".join(texts(c) for c in code)
        if table.strip() not in printed:
            failures.append("the notebook's printed table is not `taectl report quickstart`'s")
        if latex.strip() not in printed:
            failures.append("the notebook's LaTeX is not `taectl report --format latex`'s")
        images = sum(1 for c in code for o in c.get("outputs", [])
                     if "image/png" in o.get("data", {}))
        if images < 1:
            failures.append("no figure was drawn")
        if "different" not in printed or "no-pos vs baseline on eval/acc" not in printed:
            failures.append("the comparison of two variants printed nothing")
        with open(os.path.join(work, "quickstart-ablation.tex")) as f:
            if f.read() != latex:
                failures.append("quickstart-ablation.tex is not the LaTeX taectl prints")
        errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
        if errors:
            failures.append(f"{len(errors)} cell(s) raised")
        if failures:
            raise SystemExit("\n".join(failures))
        if OUT:
            os.makedirs(OUT, exist_ok=True)
            nbformat.write(nb, os.path.join(OUT, "ablation.ipynb"))
        print(f"{NOTEBOOK}: {len(code)} code cells ran; the table, the figure and the LaTeX are "
              "taed's")
    finally:
        subprocess.run([os.path.join(BIN, "taectl"), "--home", home, "down"], capture_output=True,
                       timeout=120)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
