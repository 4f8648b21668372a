#!/bin/bash
# Session 28 call a: pooled split-KV decode (the tiles past each partition's front handed out
# at run time). verify (pool cases and the replay check); decode bench with pools (25 %) and
# without (FLEXKERN_CUDA_POOL=0, the previous modules), alternating; 12 and 40 %; block traces.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s28a; mkdir -p $O
date -u +%FT%TZ
timeout 200 ./flexkern verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules|pool" $O/verify.log | cut -c1-200 | head -24
date -u +%FT%TZ
for r in 1 2; do for p in 25 0; do
  FLEXKERN_CUDA_POOL=$p timeout 60 ./flexkern bench attn --device cuda --only decode > $O/a.log 2>&1
  echo "== pool $p round $r" >> $O/attn.log; cat $O/a.log >> $O/attn.log
  echo "pool $p: $(grep -E '^decode' $O/a.log | awk '{printf "%s ", $(NF-3)}')"
done; done
for p in 12 40; do
  FLEXKERN_CUDA_POOL=$p timeout 60 ./flexkern bench attn --device cuda --only L131072 > $O/a.log 2>&1
  echo "== pool $p" >> $O/attn.log; cat $O/a.log >> $O/attn.log
  echo "pool $p: $(grep -E '^decode' $O/a.log | awk '{printf "%s ", $(NF-3)}')"
done
date -u +%FT%TZ
for p in 25 0; do for c in "L131072 Hq32/Hkv8 D128 bf16 contiguous" "L131072 Hq32/Hkv8 D128 fp8e4m3 contiguous"; do
  FLEXKERN_CUDA_POOL=$p FLEXKERN_CUDA_TRACE=1 timeout 60 ./flexkern bench attn --device cuda --only "$c" > $O/t.log 2>&1
  echo "== trace pool $p $c" >> $O/trace.log; cat $O/t.log >> $O/trace.log
  echo "pool $p $c: $(grep -E 'trace:' $O/t.log | cut -c1-300)"
done; done
date -u +%FT%TZ
