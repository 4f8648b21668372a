#!/usr/bin/env bash
# flexkern's attention benchmarks and the PyTorch peers (SDPA, compiled FlexAttention) in one
# run on this machine. Installs torch from PyPI into .cache/venv-torch once (large, ~5 GB).
# Usage: bash bench/attention_peers.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.cache/venv-torch
if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch numpy
fi
cargo build --release -q -p flexkern-cli
date -u +"# %Y-%m-%d %H:%M UTC"; uname -srm; grep -m1 'model name' /proc/cpuinfo || true; echo "# threads: $(nproc)"
echo "## flexkern"
./target/release/flexkern bench attn "$@"
echo "## PyTorch peers (case,median_ms,rate,unit)"
"$venv/bin/python" bench/attention_peers_cpu.py "$@"
