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
echo "== all tests passed"
