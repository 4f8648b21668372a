#!/bin/bash
# Session 14 call m (H100): the final binary's decode, 128 tokens at ctx 160, two runs per model
# after a warm-up run: 8B F16 / Q8_0 / Q4_0 / Q4_K_M and SmolLM2-135M Q4_0; copy bandwidth of
# the same call for the bound.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s14m; mkdir -p $O
date -u +%FT%TZ
./flexkern bench gemv --device cuda --reps 10 --formats f16 --n 4096 --k 4096 2>&1 | grep "copy bandwidth"
S="The three laws of robotics are"
for sf in "llama3-8b f16" "llama3-8b q8_0" "llama3-8b q4_0" "llama3-8b q4_k_m" "smollm2-135m q4_0"; do
  set -- $sf
  timeout 200 ./flexkern synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  echo "$1 $2 file $(stat -c %s /tmp/b.gguf) bytes"
  timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1
  for r in 1 2; do
    timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >/dev/null
    echo "$1 $2 decode128 $(grep -h -o 'decode:.*' $O/r.txt | tail -1 | cut -c1-40)"
  done
  rm -f /tmp/b.gguf
done
date -u +%FT%TZ
