#!/bin/bash
# Session 29 call d: where the decode kernel's loop spends its cycles at B1 x 128k (new phase
# accounting under FLEXKERN_CUDA_TRACE=1: waiting for tiles, queueing copies, Q K^T, softmax),
# at the default pipeline and two others.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/d; mkdir -p $O
F=../../../../.devcarry/s29d/flexkern
date -u +%FT%TZ
for mma in "" 64,3 128,2 64,2,0,0; do
  env ${mma:+FLEXKERN_CUDA_MMA=$mma} FLEXKERN_CUDA_TRACE=1 timeout 60 $F bench attn --device cuda --only L131072 > $O/t_${mma:-default}.log 2>&1
  echo "== [$mma] rc=$?"
  grep -E "trace:|^decode" $O/t_${mma:-default}.log | sed 's/switch gaps[^|]*|//' | cut -c1-400
done
date -u +%FT%TZ
