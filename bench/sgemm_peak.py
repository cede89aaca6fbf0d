#!/usr/bin/python3
"""Measured float32 matrix-multiply peak: best GFLOP/s of sgemm on large square matrices.

`--library openblas` (the default): torch.mm, which on CPU calls the BLAS sgemm libtorch is linked
against (Debian: OpenBLAS through libblas.so.3), the ceiling both PyTorch's and tae-train's
libtorch matmuls run on. Run it with OPENBLAS_NUM_THREADS set to the thread count being
measured; the output names the OpenBLAS kernel set that ran (`openblas_core`: OpenBLAS picks it
from the CPU model, and falls back to an old generic one, e.g. Prescott, on a CPU newer than it
knows; OPENBLAS_CORETYPE overrides it). `--library dnnl`: oneDNN's `dnnl_sgemm` (libdnnl, which
libtorch links) on the same matrices and OpenMP threads: the sgemm tae-train's fast paths call
(agent/train/kernels.h). One multiply of n x n matrices is 2 n^3 FLOPs. Prints one JSON object.
"""

import argparse
import ctypes
import json
import os
import sys
import time

import torch


def openblas_core():
    """The kernel set OpenBLAS chose in this process (None where libtorch's BLAS is not OpenBLAS)."""
    for name in ("libblas.so.3", "libopenblas.so.0"):
        try:
            lib = ctypes.CDLL(name)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return lib.openblas_get_corename().decode()
        except (OSError, AttributeError):
            continue
    return None


def dnnl_mm(a, b, c):
    """c = a @ b by oneDNN's row-major dnnl_sgemm."""
    n = a.shape[0]
    ptr = ctypes.c_void_p
    status = _DNNL.dnnl_sgemm(ctypes.c_char(b"N"), ctypes.c_char(b"N"), ctypes.c_int64(n),
                              ctypes.c_int64(n), ctypes.c_int64(n), ctypes.c_float(1.0),
                              ptr(a.data_ptr()), ctypes.c_int64(n), ptr(b.data_ptr()),
                              ctypes.c_int64(n), ctypes.c_float(0.0), ptr(c.data_ptr()),
                              ctypes.c_int64(n))
    if status != 0:
        raise RuntimeError(f"dnnl_sgemm failed: status {status}")


_DNNL = None


def main():
    global _DNNL
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sizes", default="1024,2048", help="comma-separated n")
    parser.add_argument("--repeats", type=int, default=5, help="timed multiplies per size")
    parser.add_argument("--library", choices=("openblas", "dnnl"), default="openblas")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.library == "dnnl":
        _DNNL = ctypes.CDLL("libdnnl.so.2")
        mm = dnnl_mm
    else:
        mm = lambda a, b, c: torch.mm(a, b, out=c)  # noqa: E731
    best = {}
    for n in (int(s) for s in args.sizes.split(",")):
        a = torch.randn(n, n)
        b = torch.randn(n, n)
        c = torch.empty(n, n)
        mm(a, b, c)  # warm up threads and caches
        seconds = min(_timed(lambda: mm(a, b, c)) for _ in range(args.repeats))
        best[n] = 2.0 * n ** 3 / seconds / 1e9
    n_best = max(best, key=best.get)
    print(json.dumps({
        "library": args.library,
        "threads": args.threads,
        "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
        "openblas_core": openblas_core() if args.library == "openblas" else None,
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
