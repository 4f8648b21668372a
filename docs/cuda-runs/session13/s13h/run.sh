#!/bin/bash
# Session 13 call h (H100): the final binary on synthetic models. Prompt 512 tokens (-n 32)
# three times and decode 128 tokens at ctx 160 twice, per format (Llama-3-8B shape: F16, Q8_0,
# Q4_0, Q4_K_M; SmolLM2-135M Q4_0), each after a warm-up run.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s13h; mkdir -p $O
date -u +%FT%TZ
P=$(python3 -c "print(('The three laws of robotics are a set of rules devised by the science fiction author Isaac Asimov. ' * 8)[:511])")
S="The three laws of robotics are"
for sf in "llama3-8b f16" "llama3-8b q8_0" "llama3-8b q4_0" "llama3-8b q4_k_m" "smollm2-135m q4_0"; do
  set -- $sf
  timeout 150 ./flexkern synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$P" -n 4 --temperature 0 --ctx 600 >/dev/null 2>&1
  for i in 1 2 3; do timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$P" -n 32 --temperature 0 --ctx 600 2>$O/r.txt >/dev/null; echo "$1 $2 prompt512 $(grep -h -o 'prefill.*' $O/r.txt | tail -1 | cut -c1-80)"; done
  for i in 1 2; do timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >/dev/null; echo "$1 $2 decode128 $(grep -h -o 'prefill.*' $O/r.txt | tail -1 | cut -c1-80)"; done
  rm -f /tmp/b.gguf
done
