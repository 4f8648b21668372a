#!/usr/bin/env python3
"""Cross-check flexkern's formats against an independent implementation: the `gguf` package
(gguf-py, numpy) from PyPI.

What gguf-py implements (checked against gguf 0.19): quantize for F16, BF16, Q4_0, Q4_1, Q5_0,
Q5_1, Q8_0, MXFP4; dequantize for those plus Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS. No
Q8_1, no Q8_K, no MLX, no IQ4 quantizer (tests/lut4_crosscheck.py compares those bytes with
ggml's C quantizers).

Checks, on random data of several shapes:
  * quantize, bit-exact bytes:   F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 MXFP4 (gguf-py quantizers follow
    ggml's reference quantizers operation by operation in f32, so bytes must match exactly).
  * dequantize, bit-exact f32:   all of the above plus Q2_K..Q6_K, IQ4_NL, IQ4_XS, on flexkern-quantized tensors
    and on random bytes (every scale bit pattern; NaN positions must agree).
  * K-quant and IQ4 quantize: gguf-py has no quantizer for them, so bytes cannot be compared here;
    the check is the dequantized error instead (ggml's test-quantize-fns thresholds).
  * MLX affine: gguf-py has none; compared bit-exactly against the numpy re-statement of MLX's
    affine rule below (an independent implementation written from MLX's op-level definition),
    and, where the `mlx` package installs (PyPI `mlx[cpu]`, Linux and macOS), against
    `mx.quantize` itself: every bit width (2 3 4 5 6 8), group (32 64 128), f16 and bf16.
  * gemv: flexkern's y against f64 numpy matmul of the gguf-dequantized W; integer-dot formats
    quantize the activation to Q8 (as ggml does), so the bound is 1% relative rms.

Usage: gguf_crosscheck.py --flexkern PATH/TO/flexkern [--workdir DIR]. Exit status 1 on mismatch.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import warnings

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

EXACT_Q = ["f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "mxfp4"]
DEQ_ONLY = ["q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_nl", "iq4_xs"]
GG = {
    "f32": T.F32, "f16": T.F16, "bf16": T.BF16, "q4_0": T.Q4_0, "q4_1": T.Q4_1, "q5_0": T.Q5_0,
    "q5_1": T.Q5_1, "q8_0": T.Q8_0, "q2_k": T.Q2_K, "q3_k": T.Q3_K, "q4_k": T.Q4_K, "q5_k": T.Q5_K,
    "q6_k": T.Q6_K, "iq4_nl": T.IQ4_NL, "iq4_xs": T.IQ4_XS, "mxfp4": T.MXFP4,
}
BLOCK = {"f32": 1, "f16": 1, "bf16": 1, "q2_k": 256, "q3_k": 256, "q4_k": 256, "q5_k": 256, "q6_k": 256,
         "iq4_xs": 256}
TYPE_SIZE = {"f32": 4, "f16": 2, "bf16": 2, "q4_0": 18, "q4_1": 20, "q5_0": 22, "q5_1": 24, "q8_0": 34,
             "q2_k": 84, "q3_k": 110, "q4_k": 144, "q5_k": 176, "q6_k": 210, "iq4_nl": 18, "iq4_xs": 136,
             "mxfp4": 17}
# ggml test-quantize-fns: sqrt(sum d^2) / n on 0.1 + 2 cos(i + 0.1)
THRESH = {"q2_k": 0.0075, "q3_k": 0.004, "mxfp4": 0.004}

failures = []


def fail(msg):
    print("MISMATCH:", msg)
    failures.append(msg)


class Flexkern:
    def __init__(self, exe, work):
        self.exe, self.work = exe, work

    def run(self, *args):
        r = subprocess.run([self.exe, *map(str, args)], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"flexkern {' '.join(map(str, args))}: {r.stderr.strip()}")

    def quantize(self, fmt, w):
        src, out = os.path.join(self.work, "w.npy"), os.path.join(self.work, "w.bin")
        np.save(src, w.astype(np.float32))
        self.run("quantize", "--format", fmt, "--in", src, "--out", out)
        with open(out, "rb") as f:
            return np.frombuffer(f.read(), dtype=np.uint8)

    def dequantize(self, fmt, raw, n, k):
        src, out = os.path.join(self.work, "d.bin"), os.path.join(self.work, "d.npy")
        with open(src, "wb") as f:
            f.write(raw.tobytes())
        self.run("dequantize", "--format", fmt, "--in", src, "--shape", f"{n},{k}", "--out", out)
        return np.load(out)

    def gemv(self, fmt, raw, n, k, x):
        wb, xp, out = (os.path.join(self.work, p) for p in ("g.bin", "x.npy", "y.npy"))
        with open(wb, "wb") as f:
            f.write(raw.tobytes())
        np.save(xp, x.astype(np.float32))
        self.run("gemv", "--format", fmt, "--weight", wb, "--shape", f"{n},{k}", "--x", xp, "--out", out)
        return np.load(out)


def gguf_quantize(fmt, w):
    q = quants.quantize(w.astype(np.float32), GG[fmt])
    return np.ascontiguousarray(q).view(np.uint8).reshape(-1)


def gguf_dequantize(fmt, raw, n, k):
    if fmt == "f32":
        return raw.view(np.float32).reshape(n, k)
    if fmt == "f16":
        return raw.view(np.float16).astype(np.float32).reshape(n, k)
    return quants.dequantize(raw.reshape(n, -1), GG[fmt]).reshape(n, k)


def same_f32(a, b):
    a, b = np.asarray(a, np.float32).reshape(-1), np.asarray(b, np.float32).reshape(-1)
    if a.shape != b.shape:
        return False
    nan = np.isnan(a)
    return bool(np.array_equal(nan, np.isnan(b)) and np.array_equal(a.view(np.uint32)[~nan], b.view(np.uint32)[~nan]))


def data(rng, n, k, kind):
    if kind == "normal":
        return rng.standard_normal((n, k)).astype(np.float32)
    if kind == "wide":  # per-row scales over many decades, offsets (exercise Q4_1/Q5_1 minimums)
        s = np.float32(10.0) ** rng.uniform(-4, 3, (n, 1)).astype(np.float32)
        return (rng.standard_normal((n, k)) * s + rng.uniform(-1, 1, (n, 1)) * s).astype(np.float32)
    if kind == "ties":  # small integers and halves: rounding ties, equal maxima, zero blocks
        w = rng.integers(-16, 17, (n, k)).astype(np.float32) / 2
        w[0, : min(k, 32)] = 0
        return w
    raise ValueError(kind)


def mlx_reference(w, bits, group, scale_dtype):
    """MLX affine quantize (mx.quantize, mode "affine"), restated in numpy, f32 math."""
    n, k = w.shape
    g = w.reshape(n, k // group, group).astype(np.float32)
    n_bins = np.float32((1 << bits) - 1)
    w_max = g.max(-1, keepdims=True)
    w_min = g.min(-1, keepdims=True)
    mask = np.abs(w_min) > np.abs(w_max)
    scales = np.maximum((w_max - w_min) / n_bins, np.float32(1e-7))
    scales = np.where(mask, scales, -scales)
    edge = np.where(mask, w_min, w_max)
    q0 = np.rint(edge / scales)
    scales = np.where(q0 != 0, edge / np.where(q0 != 0, q0, 1), scales).astype(np.float32)
    biases = np.where(q0 == 0, np.float32(0), edge).astype(np.float32)
    q = np.clip(np.rint((g - biases) / scales), 0, n_bins).astype(np.uint64).reshape(n, k)
    # little-endian bit stream per row: element j at bit j*bits
    bitpos = np.arange(k, dtype=np.uint64) * np.uint64(bits)
    packed = np.zeros((n, k * bits // 8), dtype=np.uint8)
    for b in range(bits):
        bit = (q >> np.uint64(b)) & np.uint64(1)
        pos = bitpos + np.uint64(b)
        np.bitwise_or.at(packed, (slice(None), (pos // 8).astype(np.int64)), (bit << (pos % 8)).astype(np.uint8))
    if scale_dtype == "f16":
        s = scales.astype(np.float16).view(np.uint8)
        bb = biases.astype(np.float16).view(np.uint8)
    else:
        s = quants.quantize(scales, T.BF16).view(np.uint8)
        bb = quants.quantize(biases, T.BF16).view(np.uint8)
    return np.concatenate([packed.reshape(-1), s.reshape(-1), bb.reshape(-1)])


def main():
    # random bytes decode to Inf/NaN scales on purpose; numpy would warn on each
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    ap = argparse.ArgumentParser()
    ap.add_argument("--flexkern", required=True)
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="gguf-xcheck-")
    os.makedirs(work, exist_ok=True)
    fk = Flexkern(args.flexkern, work)
    rng = np.random.default_rng(20261122)
    shapes = [(1, 256), (3, 512), (17, 1024), (64, 256)]
    kinds = ["normal", "wide", "ties"]
    counts = {}

    def tally(name):
        counts[name] = counts.get(name, 0) + 1

    for fmt in EXACT_Q:
        for n, k in shapes:
            for kind in kinds:
                w = data(rng, n, k, kind)
                mine = fk.quantize(fmt, w)
                ref = gguf_quantize(fmt, w)
                if not np.array_equal(mine, ref):
                    bad = np.flatnonzero(mine != ref) if mine.shape == ref.shape else []
                    fail(f"{fmt} quantize bytes [{n},{k}] {kind}: {len(bad)} bytes differ (first {bad[:5]})")
                else:
                    tally(f"{fmt} quantize bytes")
                if not same_f32(fk.dequantize(fmt, mine, n, k), gguf_dequantize(fmt, ref, n, k)):
                    fail(f"{fmt} dequantize [{n},{k}] {kind}")
                else:
                    tally(f"{fmt} dequantize f32")

    for fmt in EXACT_Q[1:] + DEQ_ONLY:
        if fmt == "f32":
            continue
        for n, k in shapes:
            raw = rng.integers(0, 256, n * (k // BLOCK.get(fmt, 32)) * TYPE_SIZE[fmt], dtype=np.uint8)
            if not same_f32(fk.dequantize(fmt, raw, n, k), gguf_dequantize(fmt, raw, n, k)):
                fail(f"{fmt} dequantize random bytes [{n},{k}]")
            else:
                tally(f"{fmt} dequantize random bytes")

    for fmt in DEQ_ONLY:
        for n, k in shapes:
            w = data(rng, n, k, "normal")
            mine = fk.quantize(fmt, w)
            if not same_f32(fk.dequantize(fmt, mine, n, k), gguf_dequantize(fmt, mine, n, k)):
                fail(f"{fmt} dequantize of flexkern-quantized [{n},{k}]")
            else:
                tally(f"{fmt} dequantize f32")
        # no gguf-py quantizer: compare the dequantized error with ggml's threshold instead
        n, k = 16, 256
        w = (0.1 + 2 * np.cos(np.arange(n * k, dtype=np.float32) + np.float32(0.1))).astype(np.float32).reshape(n, k)
        d = gguf_dequantize(fmt, fk.quantize(fmt, w), n, k)
        err = float(np.sqrt(np.sum((d.astype(np.float64) - w) ** 2)) / w.size)
        if err >= THRESH.get(fmt, 0.002):
            fail(f"{fmt} round-trip error {err:.5f} >= {THRESH.get(fmt, 0.002)}")
        else:
            tally(f"{fmt} round-trip error (gguf dequantize)")

    for bits in [2, 3, 4, 5, 6, 8]:
        for group in [32, 64, 128]:
            for sd in ["f16", "bf16"]:
                fmt = f"mlx:{bits}:{group}" + (":bf16" if sd == "bf16" else "")
                n, k = 5, 512
                w = data(rng, n, k, "normal" if group != 64 else "wide")
                mine = fk.quantize(fmt, w)
                ref = mlx_reference(w, bits, group, sd)
                if not np.array_equal(mine, ref):
                    fail(f"{fmt} quantize bytes vs numpy MLX rule")
                else:
                    tally("mlx quantize bytes (numpy rule)")

    try:
        import mlx.core as mx
    except ImportError:
        mx = None
        print("SKIPPED: the mlx package is not installed; MLX checked against the numpy rule only")
    for bits in [2, 3, 4, 5, 6, 8] if mx is not None else []:
        for group in [32, 64, 128]:
            for sd in ["f16", "bf16"]:
                w = data(rng, 5, 512, "normal" if group != 64 else "wide")
                mw = mx.array(w).astype(mx.float16 if sd == "f16" else mx.bfloat16)
                w = np.array(mw.astype(mx.float32))  # the values MLX quantizes, exactly
                q, s, b = mx.quantize(mw, group_size=group, bits=bits)
                ref = np.concatenate([np.array(a.view(mx.uint8)).reshape(-1) for a in (q, s, b)])
                fmt = f"mlx:{bits}:{group}" + (":bf16" if sd == "bf16" else "")
                if not np.array_equal(fk.quantize(fmt, w), ref):
                    fail(f"{fmt} quantize bytes vs mx.quantize")
                else:
                    tally("mlx quantize bytes (mx.quantize)")

    for fmt in EXACT_Q + DEQ_ONLY:
        n, k, m = 33, 512, 3
        w = data(rng, n, k, "normal")
        raw = fk.quantize(fmt, w)
        wd = gguf_dequantize(fmt, raw, n, k).astype(np.float64)
        x = rng.standard_normal((m, k)).astype(np.float32)
        y = fk.gemv(fmt, raw, n, k, x)
        ref = x.astype(np.float64) @ wd.T
        rel = float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
        bound = 1e-5 if fmt in ("f32", "f16", "bf16") else 1e-2
        if not rel <= bound:
            fail(f"{fmt} gemv relative error {rel:.2e} > {bound}")
        else:
            tally(f"{fmt} gemv vs f64(gguf dequantize)")

    print("\ncompared:")
    for name in sorted(counts):
        print(f"  {counts[name]:3d} x {name}")
    if failures:
        print(f"\n{len(failures)} mismatches")
        return 1
    print("\nall cross-checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
