#!/bin/bash
# Session 27 call h (the closing kernels, 8af5f45): B1 x 128k decode with finer partitions
# (FLEXKERN_CUDA_SPLIT=min,merge,max), alternating with the planned ones, and one block
# timeline of each (FLEXKERN_CUDA_TRACE=1).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s27h; mkdir -p $O
date -u +%FT%TZ
for r in 1 2; do for sp in "" "FLEXKERN_CUDA_SPLIT=128,192,1344" "FLEXKERN_CUDA_SPLIT=128,192,896" "FLEXKERN_CUDA_SPLIT=128,0,2048"; do
  env $sp timeout 60 ./flexkern bench attn --device cuda --only L131072 > $O/a.log 2>&1
  echo "== [$sp] round $r" >> $O/attn.log; cat $O/a.log >> $O/attn.log
  echo "[$sp]: $(grep -E '^decode' $O/a.log | awk '{printf "%s ", $(NF-3)}') $(grep -E '^  decode' $O/a.log | grep -o '[0-9]* blocks, partitions of [0-9]* keys' | head -1)"
done; done
date -u +%FT%TZ
for sp in "" "FLEXKERN_CUDA_SPLIT=128,192,1344"; do
  env FLEXKERN_CUDA_TRACE=1 $sp timeout 60 ./flexkern bench attn --device cuda --only "L131072 Hq32/Hkv8 D128 fp8e4m3 contiguous" > $O/t.log 2>&1
  echo "== trace [$sp]" >> $O/trace.log; cat $O/t.log >> $O/trace.log
  grep -iE 'idle|trace|wave|blocks' $O/t.log | cut -c1-220 | head -6
done
date -u +%FT%TZ
