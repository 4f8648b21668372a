#!/bin/bash
# Session 18 call d (H100): why call c's new binary gave no decode line in `run`.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s18d; mkdir -p $O
S="The three laws of robotics are"
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1; echo synth rc=$?
for env in "X=1" "FLEXKERN_GEMV_SUN=3" "FLEXKERN_CUDA_GRAPH=0" "FLEXKERN_CUDA_MMA=0"; do
  s=$(date +%s.%N)
  env $env timeout 20 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$S" -n 16 --temperature 0 --ctx 160 > $O/out.txt 2> $O/err.txt; rc=$?
  echo "== $env rc=$rc $(echo "$(date +%s.%N) - $s" | bc) s: $(tail -c 300 $O/err.txt | tr '\n' '|')"
done
date -u +%FT%TZ
