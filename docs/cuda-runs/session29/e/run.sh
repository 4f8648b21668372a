#!/bin/bash
# Session 29 call e: the decode copies' L2 prefetch (FLEXKERN_CUDA_MMA_L2, new: the hint alone)
# over every decode case, planned / 128 / 64 / 0, alternating, three rounds.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/e; mkdir -p $O
F=../../../../.devcarry/s29e/flexkern
date -u +%FT%TZ
for r in 1 2 3; do
  for l2 in plan 128 64 0; do
    if [ $l2 = plan ]; then e=; else e="FLEXKERN_CUDA_MMA_L2=$l2"; fi
    env $e timeout 90 $F bench attn --device cuda --only decode > $O/r${r}_$l2.log 2>&1
    echo "round $r l2=$l2 rc=$?: $(grep -E '^decode' $O/r${r}_$l2.log | awk '{print $(NF-3)}' | tr '\n' ' ')"
    echo "   queued: $(grep -o 'queued behind GPU work [0-9.]* ms, [0-9.]* % of copy, [0-9.]* % of read' $O/r${r}_$l2.log | awk '{print $(NF-3)}' | tr '\n' ' ')"
  done
done
rm -f $O/r2_* 
date -u +%FT%TZ
