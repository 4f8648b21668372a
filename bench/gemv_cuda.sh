#!/usr/bin/env bash
# Quantized GEMV on the GPU: `flexkern bench gemv --device cuda` (every format at 14336x4096
# and 4096x4096) and the cuBLAS f16 peer (bench/gemv_peers_cuda.py), in one run on one machine;
# each log also goes to $OUT when set.
# Usage: bench/gemv_cuda.sh [--quick]   (FLEXKERN_BIN: the flexkern binary)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin=${FLEXKERN_BIN:-flexkern}
out=${OUT:-}
log() { if [ -n "$out" ]; then tee "$out/$1"; else cat; fi; }
formats="f16,bf16,f32,q8_0,q4_0,q4_1,q5_0,q5_1,q2_k,q3_k,q4_k,q5_k,q6_k,iq4_nl,iq4_xs,mxfp4,mlx:4:64,mlx:8:64,mlx:3:32"
quick=()
if [ "${1:-}" = "--quick" ]; then quick=(--quick --n 14336,4096); fi
echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
echo "== flexkern"
"$bin" bench gemv --device cuda --formats "$formats" "${quick[@]}" 2>&1 | log gemv_cuda.log
echo "== flexkern, each pass replayed as a CUDA graph (as a decode step runs)"
"$bin" bench gemv --device cuda --graph --formats "$formats" "${quick[@]}" 2>&1 | log gemv_cuda_graph.log
echo "== PyTorch peers (cuBLAS f16)"
PYTHONUNBUFFERED=1 python3 "$here/gemv_peers_cuda.py" --graph "$@" 2>&1 | log gemv_peers_cuda.log
