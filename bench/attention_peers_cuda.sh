#!/usr/bin/env bash
# Decode attention on the GPU: `flexkern bench attn --device cuda` and the PyTorch peers (SDPA
# flash / cuDNN with native GQA, FlexAttention) on identical shapes, in one run on one machine.
# Usage: bench/attention_peers_cuda.sh [--quick]   (FLEXKERN_BIN: the flexkern binary)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin=${FLEXKERN_BIN:-flexkern}
echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
echo "== flexkern"
"$bin" bench attn --device cuda "$@"
echo "== PyTorch peers"
PYTHONUNBUFFERED=1 python3 "$here/attention_peers_cuda.py" "$@"
