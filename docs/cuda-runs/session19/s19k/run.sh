#!/bin/bash
# Session 19 call k (H100): SmolLM2 Q4_0 decode through the graph, the closing binary (hooks'
# source written only on a module-cache miss) against call i's, alternating; its step timeline.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s19k; mkdir -p $O; L=$O/runs.txt
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
for r in 1 2 3; do for b in flexkern_i flexkern; do
  timeout 40 ./$b run --device cuda --model /tmp/s.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > /dev/null 2>> $L; echo "$b rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1)"
done; done
FLEXKERN_CUDA_TRACE=step timeout 60 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$S" -n 48 --temperature 0 --ctx 160 > /dev/null 2> $O/step.txt; echo "step rc=$?"
tr '\r' '\n' < $O/step.txt | grep -v "^\s*$" | cut -c1-170 | head -14
date -u +%FT%TZ
