#!/usr/bin/env bash
# Crosscheck flexkern's K-quant formats bit for bit against independent implementations:
#   * dequantize vs gguf-py (PyPI `gguf`, numpy) for Q2_K..Q6_K, and numpy for Q8_K;
#   * quantize vs ggml's C reference quantizers (`quantize_row_qX_K_ref` from llama.cpp's
#     ggml-quants.c, taken from the llama-cpp-python sdist on PyPI and built here with
#     -O2 -DNDEBUG -ffp-contract=off: a release build without FMA contraction, as ggml's portable
#     build computes it);
#   * IQ4_NL, IQ4_XS and MXFP4 quantize and dequantize vs the same C file (lut4_crosscheck.py).
# Set FLEXKERN_SKIP_GGML=1 to run only the gguf-py part. Exits non-zero on any mismatch.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
CACHE="$ROOT/.cache"
VENV="$CACHE/venv-gguf"
LLAMA_CPP_PYTHON_VERSION=0.3.36

if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install -q --disable-pip-version-check gguf numpy

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

echo "== exporting flexkern K-quant blocks"
(cd "$ROOT" && FLEXKERN_CROSSCHECK_DIR="$WORK/data" cargo test -q -p flexkern-quant --release kquants_export)

GGML_ARGS=()
if [ -z "${FLEXKERN_SKIP_GGML:-}" ]; then
    SRC="$CACHE/ggml-src-$LLAMA_CPP_PYTHON_VERSION"
    if [ ! -f "$SRC/src/ggml-quants.c" ]; then
        echo "== fetching ggml sources (llama-cpp-python $LLAMA_CPP_PYTHON_VERSION sdist)"
        mkdir -p "$WORK/pip-tmp"
        # pip unpacks the sdist, then fails to build its metadata (no cmake build here):
        # --no-clean keeps the unpacked tree, which is all this needs.
        TMPDIR="$WORK/pip-tmp" "$VENV/bin/pip" download --disable-pip-version-check --no-clean \
            --no-deps --no-binary :all: --no-build-isolation \
            "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$WORK/dl" >"$WORK/pip.log" 2>&1 || true
        found="$(find "$WORK/pip-tmp" -path '*/vendor/llama.cpp/ggml/src/ggml-quants.c' | head -n 1)"
        if [ -z "$found" ]; then
            echo "could not fetch the ggml sources; see pip's log:" >&2
            tail -n 20 "$WORK/pip.log" >&2
            exit 2
        fi
        rm -rf "$SRC"
        mkdir -p "$SRC"
        cp -r "$(dirname "$(dirname "$found")")/." "$SRC/"
    fi
    LIB="$CACHE/ggml-ref/libggml_quants_ref.so"
    if [ ! -f "$LIB" ] || [ "$SRC/src/ggml-quants.c" -nt "$LIB" ] || [ "$0" -nt "$LIB" ]; then
        echo "== building ggml's reference quantizers"
        mkdir -p "$CACHE/ggml-ref"
        # The few ggml.c symbols ggml-quants.c links against; the _ref quantizers never call them.
        cat >"$CACHE/ggml-ref/stubs.c" <<'CEOF'
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdint.h>
void ggml_abort(const char *file, int line, const char *fmt, ...) {
    fprintf(stderr, "ggml_abort at %s:%d (%s)\n", file, line, fmt);
    abort();
}
size_t ggml_row_size(int type, int64_t ne) { (void)type; (void)ne; abort(); }
size_t ggml_type_size(int type) { (void)type; abort(); }
const char *ggml_type_name(int type) { (void)type; return "?"; }
CEOF
        cc -O2 -DNDEBUG -ffp-contract=off -fPIC -shared -I"$SRC/include" -I"$SRC/src" \
            "$SRC/src/ggml-quants.c" "$CACHE/ggml-ref/stubs.c" -lm -o "$LIB"
    fi
    GGML_ARGS=(--ggml-lib "$LIB")
fi

echo "== comparing"
"$VENV/bin/python" "$HERE/kquants_crosscheck.py" "$WORK/data" "${GGML_ARGS[@]}"

if [ -z "${FLEXKERN_SKIP_GGML:-}" ]; then
    echo "== IQ4_NL / IQ4_XS / MXFP4 vs ggml's C quantizers and dequantizers"
    if [ -z "${FLEXKERN_BIN:-}" ]; then
        (cd "$ROOT" && cargo build -q -p flexkern-cli)
        FLEXKERN_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/flexkern"
    fi
    "$VENV/bin/python" "$HERE/lut4_crosscheck.py" --flexkern "$FLEXKERN_BIN" --ggml-lib "$LIB"
fi
