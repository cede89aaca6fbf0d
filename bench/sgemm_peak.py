#!/usr/bin/python3
"""Measured float32 matrix-multiply peak: best GFLOP/s of torch.mm on large square matrices.

torch.mm on CPU calls the BLAS sgemm libtorch is linked against (Debian: OpenBLAS through
libblas.so.3), so this is the sgemm ceiling both trainers' matmuls run on. Run it with
OPENBLAS_NUM_THREADS set to the thread count being measured. One multiply of n x n matrices is
2 n^3 FLOPs. Prints one JSON object.
"""

import argparse
import json
import os
import sys
import time

import torch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sizes", default="1024,2048", help="comma-separated n")
    parser.add_argument("--repeats", type=int, default=5, help="timed multiplies per size")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    best = {}
    for n in (int(s) for s in args.sizes.split(",")):
        a = torch.randn(n, n)
        b = torch.randn(n, n)
        c = torch.empty(n, n)
        torch.mm(a, b, out=c)  # warm up BLAS threads and caches
        seconds = min(_timed(lambda: torch.mm(a, b, out=c)) for _ in range(args.repeats))
        best[n] = 2.0 * n ** 3 / seconds / 1e9
    n_best = max(best, key=best.get)
    print(json.dumps({
        "threads": args.threads,
        "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
        "gflops_by_n": {str(n): g for n, g in best.items()},
        "peak_gflops": best[n_best],
        "peak_n": n_best,
    }))
    return 0


def _timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


if __name__ == "__main__":
    sys.exit(main())
