#!/usr/bin/env bash
# Cross-check flexkern's quant formats against gguf-py (PyPI `gguf`, numpy).
# Creates/reuses a venv in .cache/venv-gguf, builds the release `flexkern` binary (unless
# FLEXKERN_BIN points at one), runs gguf_crosscheck.py. Non-zero exit on any mismatch.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.cache/venv-gguf"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import gguf, numpy" 2>/dev/null; then
    "$VENV/bin/pip" install --quiet gguf numpy
fi
# MLX itself, for the MLX affine bytes; optional (no wheel on some platforms): the script says
# SKIPPED when it is missing.
if ! "$VENV/bin/python" -c "import mlx.core" 2>/dev/null; then
    "$VENV/bin/pip" install --quiet "mlx[cpu]" || echo "mlx did not install; MLX vs numpy rule only"
fi
if [ -z "${FLEXKERN_BIN:-}" ]; then
    cargo build --release -p flexkern-cli --quiet
    FLEXKERN_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/flexkern"
fi
"$VENV/bin/python" "$ROOT/crates/flexkern-quant/tests/gguf_crosscheck.py" --flexkern "$FLEXKERN_BIN" "$@"
