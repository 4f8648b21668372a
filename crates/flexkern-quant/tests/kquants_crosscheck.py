#!/usr/bin/env python3
"""Bit-exactness crosscheck of flexkern's K-quant formats against independent implementations.

Reads what `cargo test -p flexkern-quant kquants_export` wrote under $FLEXKERN_CROSSCHECK_DIR:
  <fmt>_<case>.blocks   raw block bytes (ggml layout)
  <fmt>_<case>.f32      flexkern's dequantized values
  <fmt>_<case>.src.f32  (quantized cases) the f32 input flexkern quantized

Checks, each bit for bit:
  1. dequantize: gguf-py (`gguf.quants.dequantize`, numpy) on the same bytes, for Q2_K..Q6_K;
     Q8_K, which gguf-py does not implement, against `d * qs` in numpy.
  2. with --ggml-lib (ggml's C ggml-quants.c from llama.cpp, built by kquants_crosscheck.sh):
     - dequantize: ggml's `dequantize_row_<fmt>` on the same bytes;
     - quantize: ggml's `quantize_row_<fmt>_ref` on the same f32 input, compared byte for byte
       with flexkern's blocks (gguf-py itself has no K-quant quantizers).
Exits 1 on any mismatch, 2 on missing inputs.
"""

import argparse
import ctypes
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

FORMATS = {
    "q2_k": (T.Q2_K, 84),
    "q3_k": (T.Q3_K, 110),
    "q4_k": (T.Q4_K, 144),
    "q5_k": (T.Q5_K, 176),
    "q6_k": (T.Q6_K, 210),
    "q8_k": (T.Q8_K, 292),
}
QK_K = 256


def dequant_reference(fmt: str, blocks: np.ndarray) -> np.ndarray:
    if fmt == "q8_k":
        d = blocks[:, :4].copy().view(np.float32)  # (n, 1)
        qs = blocks[:, 4 : 4 + QK_K].copy().view(np.int8).astype(np.float32)
        return (d * qs).reshape(-1).astype(np.float32)
    qtype, _ = FORMATS[fmt]
    return np.asarray(quants.dequantize(blocks.reshape(-1), qtype), dtype=np.float32).reshape(-1)


def first_mismatches(a: np.ndarray, b: np.ndarray, k: int = 3) -> str:
    idx = np.nonzero(a != b)[0][:k]
    return ", ".join(f"[{i}] {a[i]!r} vs {b[i]!r}" for i in idx)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", type=Path)
    ap.add_argument("--ggml-lib", type=Path, help="shared library with ggml's quantize_row_*_ref")
    args = ap.parse_args()

    files = sorted(args.dir.glob("*.blocks"))
    if not files:
        print(f"no *.blocks under {args.dir}: did the export tests run?", file=sys.stderr)
        return 2
    lib = ctypes.CDLL(str(args.ggml_lib)) if args.ggml_lib else None

    failures = 0
    checks = 0
    seen = set()
    for path in files:
        case = path.name[: -len(".blocks")]
        fmt = case[:4]
        _, size = FORMATS[fmt]
        seen.add(fmt)
        raw = np.fromfile(path, dtype=np.uint8)
        if raw.size % size:
            print(f"FAIL {case}: {raw.size} bytes is not a multiple of {size}")
            failures += 1
            continue
        blocks = raw.reshape(-1, size)
        ours = np.fromfile(args.dir / f"{case}.f32", dtype=np.float32)
        ref = dequant_reference(fmt, blocks)
        checks += 1
        same = ours.shape == ref.shape and np.array_equal(ours.view(np.uint32), ref.view(np.uint32))
        who = "numpy d*qs" if fmt == "q8_k" else "gguf-py"
        if same:
            print(f"ok   {case}: dequantize of {len(blocks)} blocks bit-identical to {who}")
        else:
            failures += 1
            detail = first_mismatches(ours, ref) if ours.shape == ref.shape else f"shape {ours.shape} vs {ref.shape}"
            print(f"FAIL {case}: dequantize differs from {who}: {detail}")

        if lib is not None:
            fn = getattr(lib, f"dequantize_row_{fmt[:2]}_K")
            fn.restype = None
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
            cblocks = np.ascontiguousarray(blocks)
            cref = np.full(len(blocks) * QK_K, np.nan, dtype=np.float32)
            fn(cblocks.ctypes.data, cref.ctypes.data, ctypes.c_int64(cref.size))
            checks += 1
            if ours.shape == cref.shape and np.array_equal(ours.view(np.uint32), cref.view(np.uint32)):
                print(f"ok   {case}: dequantize of {len(blocks)} blocks bit-identical to ggml dequantize_row_{fmt[:2]}_K")
            else:
                failures += 1
                print(f"FAIL {case}: dequantize differs from ggml: {first_mismatches(ours, cref)}")

        src_path = args.dir / f"{case}.src.f32"
        if lib is not None and src_path.exists():
            src = np.ascontiguousarray(np.fromfile(src_path, dtype=np.float32))
            out = np.zeros(len(blocks) * size, dtype=np.uint8)
            fn = getattr(lib, f"quantize_row_{fmt[:2]}_K_ref")
            fn.restype = None
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
            fn(src.ctypes.data, out.ctypes.data, ctypes.c_int64(src.size))
            checks += 1
            diff = np.nonzero(out.reshape(-1, size) != blocks)
            if diff[0].size == 0:
                print(f"ok   {case}: quantize of {src.size} values byte-identical to ggml quantize_row_{fmt[:2]}_K_ref")
            else:
                failures += 1
                bad_blocks = np.unique(diff[0])
                print(
                    f"FAIL {case}: quantize differs from ggml in {bad_blocks.size}/{len(blocks)} blocks "
                    f"(first: block {bad_blocks[0]}, byte offsets {diff[1][diff[0] == bad_blocks[0]][:8].tolist()})"
                )
    missing = set(FORMATS) - seen
    if missing:
        print(f"FAIL: no export for {sorted(missing)}")
        failures += 1
    print(f"{checks - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
