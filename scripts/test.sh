#!/usr/bin/env bash
# The test command (README, .ci/run): every Rust test, the oracle table, then the cross-checks
# against independent implementations (gguf-py from PyPI, ggml's C reference quantizers) in a
# cached virtual environment under .cache/.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
echo "== cargo fmt --check, cargo clippy -D warnings"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -q -- -D warnings
echo "== cargo test (workspace; the dev profile is optimized)"
cargo test --workspace --all-targets 2>&1
echo "== flexkern verify --quick (every attention variant against the f64 oracle, CPU)"
cargo build -q -p flexkern-cli
"$target/debug/flexkern" verify --quick
echo "== the same with the portable (non-SIMD) kernels forced"
FLEXKERN_FORCE_SCALAR=1 "$target/debug/flexkern" verify --quick
echo "== flexkern verify --device cuda --quick (the binary prints SKIPPED and exits 3 without a driver)"
rc=0; "$target/debug/flexkern" verify --device cuda --quick || rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || exit "$rc"
echo "== quantized formats vs gguf-py (PyPI gguf)"
FLEXKERN_BIN="$target/debug/flexkern" bash crates/flexkern-quant/tests/gguf_crosscheck.sh
echo "== K-quants vs gguf-py and ggml's reference quantizers"
bash crates/flexkern-quant/tests/kquants_crosscheck.sh
# ---- bounded fuzzing (issue 16; docs/FUZZING.md) ---------------------------------------------
# About a minute: mutated GGUF models through load + forward, and random attn / quantize /
# dequantize / gemv argument combinations through the binary (no panic, no signal, no hang,
# every error names a flag or file). A fresh seed each run; the seed is printed to reproduce.
fuzz_seed=${FLEXKERN_FUZZ_SEED:-$(date +%s)}
echo "== bounded fuzzing (seed $fuzz_seed; reproduce with FLEXKERN_FUZZ_SEED=$fuzz_seed)"
FLEXKERN_FUZZ_SEED=$fuzz_seed FLEXKERN_FUZZ_SECS=15 \
    cargo test -q -p flexkern-model --test fuzz_load -p flexkern-gguf --test fuzz 2>&1
FLEXKERN_FUZZ_SEED=$fuzz_seed FLEXKERN_FUZZ_SECS=20 \
    cargo test -q -p flexkern-cli --test fuzz_cli 2>&1
# ----------------------------------------------------------------------------------------------
echo "== all tests passed"
