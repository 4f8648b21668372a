#!/bin/bash
# Session 21 call b: verify, the trace and old/new prefill with Q by cp.async and the two-row softmax.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s21b; mkdir -p $O
date -u +%FT%TZ
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "^verify:|modules" $O/verify.txt | tail -2; grep -iE " fail" $O/verify.txt | head -5
FLEXKERN_CUDA_TRACE=1 timeout 200 ./flexkern bench attn --device cuda --only prefill > $O/trace.txt 2>&1; echo "trace rc=$?"
for r in 1 2; do
  for b in old new; do
    bin=./flexkern; [ $b = old ] && bin=./flexkern_old
    timeout 150 $bin bench attn --device cuda --only prefill > $O/bench_${b}_$r.txt 2>&1; echo "$b $r rc=$?"
  done
done
date -u +%FT%TZ
row() { grep -E "^(prefill|chunked)" $1 | awk '{n=NF; printf "%.0f|", $(n-5)/1000}'; echo; }
for f in bench_old_1 bench_new_1 bench_old_2 bench_new_2 trace; do echo "$f: $(row $O/$f.txt)"; done
grep "trace:" $O/trace.txt | sed 's/.*durations/durations/; s/switch gaps.*phases/phases/' | cut -c1-330
