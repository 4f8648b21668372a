#!/bin/bash
# Session 26 call i: decode attention split at short contexts (FLEXKERN_CUDA_SPLIT=64,32 and
# 64,96, a merge launch after) against the default (one block a KV head), 8B Q4_K_M, alternating;
# the step trace of each.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s26i; mkdir -p $O
date -u +%FT%TZ
timeout 150 ./flexkern synth-model --shape llama3-8b --format q4_k_m --tokenizer bytes --vocab 49152 --out /tmp/q4_k_m.gguf > /dev/null 2>&1; echo "synth rc=$?"
S="The three laws of robotics are"
for r in 1 2 3; do for s in "X=0" "FLEXKERN_CUDA_SPLIT=64,32" "FLEXKERN_CUDA_SPLIT=64,96"; do
  env $s timeout 40 ./flexkern run --device cuda --model /tmp/q4_k_m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $O/runs.txt; echo "$s rc=$? $(tail -c 300 $O/runs.txt | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done
for s in "X=0" "FLEXKERN_CUDA_SPLIT=64,32"; do
  env $s FLEXKERN_CUDA_TRACE=step timeout 40 ./flexkern run --device cuda --model /tmp/q4_k_m.gguf --prompt "$S" -n 40 --temperature 0 --ctx 160 > /dev/null 2> $O/trace.txt
  echo "== $s trace"; grep -E "attention|join|merge|kv_write|step trace: [0-9]" $O/trace.txt | cut -c1-160 | head -12
done
date -u +%FT%TZ
