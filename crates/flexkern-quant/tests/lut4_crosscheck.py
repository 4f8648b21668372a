#!/usr/bin/env python3
"""IQ4_NL, IQ4_XS and MXFP4 against ggml's own C code (ggml-quants.c, built by
kquants_crosscheck.sh without FP contraction), bit for bit:
  * quantize: flexkern's `quantize` bytes vs ggml's `quantize_iq4_nl(.., NULL)` (what
    llama-quantize runs without an importance matrix; `quantize_row_iq4_nl_ref` skips the scale
    search), `quantize_row_iq4_xs_ref` and `quantize_row_mxfp4_ref`;
  * dequantize: flexkern's f32 vs ggml's `dequantize_row_*` on the same bytes.
gguf-py's side (dequantize, MXFP4 quantize, gemv) is in gguf_crosscheck.py.

Usage: lut4_crosscheck.py --flexkern PATH/TO/flexkern --ggml-lib libggml_quants_ref.so
Exit status 1 on any mismatch.
"""

import argparse
import ctypes
import os
import subprocess
import sys
import tempfile

import numpy as np

FORMATS = {"iq4_nl": (32, 18), "iq4_xs": (256, 136), "mxfp4": (32, 17)}


def data(rng, n, k, kind):
    if kind == "normal":
        return rng.standard_normal((n, k)).astype(np.float32)
    if kind == "wide":  # per-row scales over many decades, one outlier per row
        s = np.float32(10.0) ** rng.uniform(-4, 3, (n, 1)).astype(np.float32)
        w = (rng.standard_normal((n, k)) * s).astype(np.float32)
        w[:, rng.integers(0, k)] *= 20
        return w
    if kind == "ties":  # small integers and halves, a zero block, a zero sub-block
        w = rng.integers(-16, 17, (n, k)).astype(np.float32) / 2
        w[0, :32] = 0
        w[-1, :k] = 0
        return w
    raise ValueError(kind)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flexkern", required=True)
    ap.add_argument("--ggml-lib", required=True)
    args = ap.parse_args()
    lib = ctypes.CDLL(args.ggml_lib)
    work = tempfile.mkdtemp(prefix="lut4-xcheck-")
    rng = np.random.default_rng(20261123)
    vp, i64 = ctypes.c_void_p, ctypes.c_int64

    def ggml_quantize(fmt, w):
        n, k = w.shape
        qk, size = FORMATS[fmt]
        out = np.zeros(n * (k // qk) * size, dtype=np.uint8)
        src = np.ascontiguousarray(w, dtype=np.float32)
        if fmt == "iq4_nl":
            fn = lib.quantize_iq4_nl
            fn.restype, fn.argtypes = ctypes.c_size_t, [vp, vp, i64, i64, vp]
            fn(src.ctypes.data, out.ctypes.data, n, k, None)
        else:
            fn = getattr(lib, f"quantize_row_{fmt}_ref")
            fn.restype, fn.argtypes = None, [vp, vp, i64]
            fn(src.ctypes.data, out.ctypes.data, n * k)
        return out

    def ggml_dequantize(fmt, raw, count):
        fn = getattr(lib, f"dequantize_row_{fmt}")
        fn.restype, fn.argtypes = None, [vp, vp, i64]
        out = np.full(count, np.nan, dtype=np.float32)
        fn(np.ascontiguousarray(raw).ctypes.data, out.ctypes.data, count)
        return out

    def flexkern(*a):
        r = subprocess.run([args.flexkern, *map(str, a)], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(r.stderr)

    failures, checks = 0, 0
    for fmt, (qk, size) in FORMATS.items():
        for n, k in [(1, 256), (7, 512), (33, 1024)]:
            for kind in ["normal", "wide", "ties"]:
                w = data(rng, n, k, kind)
                src, out, deq = (os.path.join(work, p) for p in ("w.npy", "w.bin", "d.npy"))
                np.save(src, w)
                flexkern("quantize", "--format", fmt, "--in", src, "--out", out)
                mine = np.fromfile(out, dtype=np.uint8)
                ref = ggml_quantize(fmt, w)
                checks += 1
                if not np.array_equal(mine, ref):
                    failures += 1
                    bad = np.unique(np.flatnonzero(mine != ref) // size) if mine.shape == ref.shape else []
                    print(f"FAIL {fmt} [{n},{k}] {kind}: quantize differs from ggml in blocks {bad[:8]}")
                flexkern("dequantize", "--format", fmt, "--in", out, "--shape", f"{n},{k}", "--out", deq)
                got = np.load(deq).reshape(-1)
                cref = ggml_dequantize(fmt, mine, n * k)
                checks += 1
                if not np.array_equal(got.view(np.uint32), cref.view(np.uint32)):
                    failures += 1
                    print(f"FAIL {fmt} [{n},{k}] {kind}: dequantize differs from ggml")
        # every byte pattern: scales of all exponents, Inf and NaN included
        raw = rng.integers(0, 256, 64 * size, dtype=np.uint8)
        src, deq = os.path.join(work, "r.bin"), os.path.join(work, "r.npy")
        raw.tofile(src)
        flexkern("dequantize", "--format", fmt, "--in", src, "--shape", f"{64 * qk // 256},256", "--out", deq)
        got = np.load(deq).reshape(-1)
        cref = ggml_dequantize(fmt, raw, 64 * qk)
        checks += 1
        nan = np.isnan(got)
        if not (np.array_equal(nan, np.isnan(cref)) and np.array_equal(got[~nan].view(np.uint32), cref[~nan].view(np.uint32))):
            failures += 1
            print(f"FAIL {fmt}: dequantize of random bytes differs from ggml")
        print(f"{fmt}: quantize bytes and dequantize f32 compared with ggml")
    print(f"{checks - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
