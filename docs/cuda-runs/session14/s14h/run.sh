#!/bin/bash
# Session 14 call h (H100): call g's binary against the session's start (s14a), alternating:
# decode 128 tokens at ctx 160 (two rounds) and prompt 512 (one each), 8B Q4_0 / Q8_0 / Q4_K_M
# and SmolLM2-135M Q4_0, after one warm-up run of each binary.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s14h; mkdir -p $O
date -u +%FT%TZ
P=$(python3 -c "print(('The three laws of robotics are a set of rules devised by the science fiction author Isaac Asimov. ' * 8)[:511])")
S="The three laws of robotics are"
for sf in "llama3-8b q4_0" "llama3-8b q8_0" "llama3-8b q4_k_m" "smollm2-135m q4_0"; do
  set -- $sf
  timeout 150 ./flexkern synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  for bin in ./flexkern_old ./flexkern; do timeout 60 $bin run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 600 >/dev/null 2>&1; done
  for r in 1 2; do for bin in ./flexkern_old ./flexkern; do
    timeout 60 $bin run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >$O/t_$(basename $bin).txt
    echo "$1 $2 decode128 [$bin] $(grep -h -o 'decode:.*' $O/r.txt | tail -1 | cut -c1-40)"
  done; done
  cmp -s $O/t_flexkern.txt $O/t_flexkern_old.txt && echo "$1 $2: same text old/new" || echo "$1 $2: TEXT DIFFERS old/new"
  for bin in ./flexkern_old ./flexkern; do
    timeout 60 $bin run --device cuda --model /tmp/b.gguf --prompt "$P" -n 32 --temperature 0 --ctx 600 2>$O/r.txt >/dev/null
    echo "$1 $2 prompt512 [$bin] $(grep -h -o 'prefill.*' $O/r.txt | tail -1 | cut -c1-40)"
  done
  rm -f /tmp/b.gguf
done
date -u +%FT%TZ
