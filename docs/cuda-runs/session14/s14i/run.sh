#!/bin/bash
# Session 14 call i (H100): explicit load batches in the direct streamed GEMV, the first batch
# loaded before the programmatic-launch wait. Alternating old (s14a) / g (bb854a5) / new:
# bench gemv (graph), decode 128 on 8B Q4_0 / Q8_0 and SmolLM2-135M Q4_0.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s14i; mkdir -p $O
date -u +%FT%TZ
B() { # label binary env...
  local l=$1 bin=$2; shift 2
  env "$@" $bin bench gemv --device cuda --graph --reps 20 --formats q8_0,q4_0 --n 14336,4096,576 --k 4096 > $O/g_$l.txt 2>&1
  env "$@" $bin bench gemv --device cuda --graph --reps 20 --formats q8_0,q4_0 --n 4096,576 --k 14336 >> $O/g_$l.txt 2>&1
  echo "== $l"; grep -E "^(q8_0|q4_0|copy)" $O/g_$l.txt | awk '{print $1,$2,$3,$4,$6}' | tr '\n' ';'; echo
}
B old ./flexkern_old X=1
B g ./flexkern_g X=1
B new ./flexkern X=1
grep -h "stream" $O/g_new.txt | awk '{print $NF}' | sort -u
S="The three laws of robotics are"
for sf in "smollm2-135m q4_0" "llama3-8b q4_0" "llama3-8b q8_0"; do
  set -- $sf
  timeout 150 ./flexkern synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  for bin in ./flexkern_old ./flexkern_g ./flexkern; do timeout 60 $bin run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1; done
  for r in 1 2; do for bin in ./flexkern_old ./flexkern_g ./flexkern; do
    timeout 60 $bin run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >$O/t_$(basename $bin).txt
    echo "$1 $2 decode128 [$bin] $(grep -h -o 'decode:.*' $O/r.txt | tail -1 | cut -c1-40)"
  done; done
  cmp -s $O/t_flexkern.txt $O/t_flexkern_old.txt && echo "$1 $2: same text old/new" || echo "$1 $2: TEXT DIFFERS old/new"
  rm -f /tmp/b.gguf
done
date -u +%FT%TZ
