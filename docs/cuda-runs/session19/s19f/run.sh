#!/bin/bash
# Session 19 call f (H100): does the decode graph replay? SmolLM2 Q4_0 plain, traced, and with
# FLEXKERN_CUDA_GRAPH=0, with the new messages on recording and replay.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s19f; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/m.gguf > /dev/null 2>&1; echo "synth rc=$?"
for i in 1 2; do
  timeout 40 ./flexkern run --device cuda --model /tmp/m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > /dev/null 2> $O/plain$i.txt; echo "plain rc=$?"; tr '\r' '\n' < $O/plain$i.txt | grep -v "^\s*$" | cut -c1-240 | tail -4
  FLEXKERN_CUDA_GRAPH=0 timeout 40 ./flexkern run --device cuda --model /tmp/m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > /dev/null 2> $O/eager$i.txt; echo "eager rc=$?"; tr '\r' '\n' < $O/eager$i.txt | grep -v "^\s*$" | cut -c1-240 | tail -2
done
FLEXKERN_CUDA_TRACE=step timeout 60 ./flexkern run --device cuda --model /tmp/m.gguf --prompt "$S" -n 48 --temperature 0 --ctx 160 > /dev/null 2> $O/step.txt; echo "step rc=$?"
tr '\r' '\n' < $O/step.txt | grep -v "^\s*$" | cut -c1-240 | tail -40
date -u +%FT%TZ
