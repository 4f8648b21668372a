#!/bin/bash
# Session 21 call a: where a Hopper prefill block's time goes (phase marks and the consumers'
# loop cycles, FLEXKERN_CUDA_TRACE=1), and the Q loads batched (new) against HEAD (old).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s21a; mkdir -p $O
date -u +%FT%TZ
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
FLEXKERN_CUDA_TRACE=1 timeout 200 ./flexkern bench attn --device cuda --only prefill > $O/trace.txt 2>&1; echo "trace rc=$?"
for r in 1 2; do
  for b in old new; do
    bin=./flexkern; [ $b = old ] && bin=./flexkern_old
    timeout 150 $bin bench attn --device cuda --only prefill > $O/bench_${b}_$r.txt 2>&1; echo "$b $r rc=$?"
  done
done
date -u +%FT%TZ
grep -E "TFLOP|prefill|chunked" $O/bench_new_2.txt | head -40
