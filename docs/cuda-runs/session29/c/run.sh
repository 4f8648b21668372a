#!/bin/bash
# Session 29 call c: the decode kernel's L2 prefetch hint (FLEXKERN_CUDA_MMA=tile,2,0,l2) at
# B1 x 128k, alternating, two rounds: the streaming study (call b) lost 7 % to the 256-byte hint.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/c; mkdir -p $O
F=../../../../.devcarry/s29b/flexkern
date -u +%FT%TZ
for r in 1 2; do
  for l2 in 256 0 128 64; do
    FLEXKERN_CUDA_MMA=64,2,0,$l2 timeout 60 $F bench attn --device cuda --only L131072 > $O/b_$l2.log 2>&1
    echo "round $r bf16-tile64 l2=$l2: $(grep -E '^decode.*bf16' $O/b_$l2.log | awk '{print $(NF-3)}' | tr '\n' ' ')"
    FLEXKERN_CUDA_MMA=128,2,0,$l2 timeout 60 $F bench attn --device cuda --only L131072 > $O/f_$l2.log 2>&1
    echo "round $r fp8-tile128 l2=$l2: $(grep -E '^decode.*fp8' $O/f_$l2.log | awk '{print $(NF-3)}' | tr '\n' ' ')"
  done
done
date -u +%FT%TZ
