#!/bin/bash
# Session 29 call i: threads a K/V row in the decode copies (FLEXKERN_CUDA_MMA=tile,2,c,128) at
# B1 x 128k: fewer threads a row, fewer passes and page shuffles a stage. Two rounds.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/i; mkdir -p $O
F=../../../../.devcarry/s29i/flexkern
date -u +%FT%TZ
for r in 1 2; do
  for c in 0 1 2 4; do
    FLEXKERN_CUDA_MMA=128,2,$c,128 timeout 60 $F bench attn --device cuda --only L131072 > $O/f$c.log 2>&1
    echo "round $r fp8 c=$c: $(grep -E '^decode.*fp8' $O/f$c.log | awk '{printf "%s ", $(NF-3)}') queued $(grep -o 'queued behind GPU work [0-9.]* ms, [0-9.]* % of copy, [0-9.]* % of read' $O/f$c.log | tail -2 | awk '{printf "%s ", $(NF-3)}')"
  done
  for c in 0 2 4 8; do
    FLEXKERN_CUDA_MMA=64,2,$c,128 timeout 60 $F bench attn --device cuda --only L131072 > $O/b$c.log 2>&1
    echo "round $r bf16 c=$c: $(grep -E '^decode.*bf16' $O/b$c.log | awk '{printf "%s ", $(NF-3)}') queued $(grep -o 'queued behind GPU work [0-9.]* ms, [0-9.]* % of copy, [0-9.]* % of read' $O/b$c.log | head -2 | awk '{printf "%s ", $(NF-3)}')"
  done
done
date -u +%FT%TZ
