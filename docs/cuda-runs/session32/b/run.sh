#!/bin/bash
# Session 32 call b: block timelines and loop phases (FLEXKERN_CUDA_TRACE=1) of B1 x 128k decode
# (bf16 and fp8, contiguous and paged 16) and of SmolLM2's B64 x 8k: contiguous head-major (the
# bench's default), contiguous token-major (FLEXKERN_BENCH_KV=token, the paged pool's order),
# paged with the page window (planned) and without it. Where does paged fp8 lose its 5 points?
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/b; mkdir -p $O
B=../../../../.devcarry/s32a/flexkern
date -u +%FT%TZ
for only in L131072 Hq9; do
  for how in head token nowin; do
    env FLEXKERN_CUDA_TRACE=1 FLEXKERN_BENCH_KV=$how $( [ $how = nowin ] && echo FLEXKERN_CUDA_PAGE_WINDOW=100000000 ) \
      timeout 60 $B bench attn --device cuda --only $only > $O/t_${only}_$how.log 2>&1
    echo "== $only $how rc=$?"
    grep -E "trace:|^  decode" $O/t_${only}_$how.log | sed 's/switch gaps[^|]*|//; s/planned afresh[^;]*;//; s/kernels of the prepared call alone [^;]*;//' | cut -c1-700
  done
done
date -u +%FT%TZ
