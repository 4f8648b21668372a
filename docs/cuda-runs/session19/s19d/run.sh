#!/bin/bash
# Session 19 call d (H100): why call c's step timelines printed nothing (SmolLM2 first).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s19d; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1; echo "synth rc=$?"
FLEXKERN_CUDA_TRACE=step timeout 60 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$S" -n 64 --temperature 0 --ctx 160 > $O/out.txt 2> $O/step_smol.txt; echo "step rc=$?"
grep -v "^\s*$" $O/step_smol.txt | cut -c1-300 | tail -40
timeout 90 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1; echo "synth rc=$?"
FLEXKERN_CUDA_TRACE=step timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 64 --temperature 0 --ctx 160 > /dev/null 2> $O/step_8b.txt; echo "step rc=$?"
grep -v "^\s*$" $O/step_8b.txt | cut -c1-300 | tail -40
date -u +%FT%TZ
