#!/usr/bin/env bash
# The test command (README, .ci/run): every Rust test, then the cross-checks against
# independent implementations (gguf-py from PyPI) in a cached virtual environment.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== cargo test (workspace)"
cargo test --workspace --all-targets 2>&1
echo "== flexkern verify --quick (oracle table, CPU)"
cargo run -q -p flexkern-cli --bin flexkern -- verify --quick
echo "== flexkern verify --device cuda: skipped (no CUDA backend in this build, no GPU in CI)"
