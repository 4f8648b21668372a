#!/bin/bash
# Session 23 call b (H200): the 8B Q4_0 step timeline with the GEMV's "released" stamped at the
# wait's return and after the activation prologue (FLEXKERN_CUDA_TRACE=step,prologue), twice each;
# GEMV fixed costs at k = 14336.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s23b; mkdir -p $O
date -u +%FT%TZ
timeout 120 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1; echo "synth rc=$?"
for r in 1 2; do
for t in step step,prologue; do
  FLEXKERN_CUDA_TRACE=$t timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "The three laws of robotics are" -n 64 --temperature 0 --ctx 160 > $O/trace_${t}_$r.txt 2>&1; echo "trace $t rc=$?"
  grep -E "^\s+fk_" $O/trace_${t}_$r.txt | sed 's/after fk_gemv//' | cut -c1-160
done
done
timeout 60 ./flexkern bench gemv --device cuda --graph --reps 20 --formats q4_0,q8_0 --n 2048,4096,8192 --k 14336 > $O/gemv_k14336.txt 2>&1; echo "k14336 rc=$?"
grep -E "^q" $O/gemv_k14336.txt
date -u +%FT%TZ
