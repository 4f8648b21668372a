#!/bin/bash
# Session 14 call o (H100): L2 bulk prefetches FK_SPF rows ahead in the direct streamed GEMV
# (FLEXKERN_GEMV_L2AHEAD, default 2). verify at the default and at 0; bench gemv --graph and
# 8B decode alternating 0 / 1 / 2 / 4.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s14o; mkdir -p $O
date -u +%FT%TZ
for v in 2 0; do
  FLEXKERN_GEMV_L2AHEAD=$v timeout 240 ./flexkern verify --device cuda > $O/verify_$v.txt 2>&1; echo "verify L2AHEAD=$v rc=$?: $(tail -1 $O/verify_$v.txt)"; grep -E " fail|FAIL" $O/verify_$v.txt | head -5
done
B() { # label env...
  local l=$1; shift
  env "$@" ./flexkern bench gemv --device cuda --graph --reps 20 --formats q8_0,q4_0 --n 14336,4096,576 --k 4096 > $O/g_$l.txt 2>&1
  env "$@" ./flexkern bench gemv --device cuda --graph --reps 20 --formats q8_0,q4_0 --n 4096,576 --k 14336 >> $O/g_$l.txt 2>&1
  echo "== $l"; grep -E "^(q8_0|q4_0|copy)" $O/g_$l.txt | awk '{print $1,$2,$3,$4,$6}' | tr '\n' ';'; echo
}
for r in 1 2; do for v in 0 1 2 4; do B a${v}_$r FLEXKERN_GEMV_L2AHEAD=$v; done; done
S="The three laws of robotics are"
for sf in "llama3-8b q4_0" "llama3-8b q8_0" "smollm2-135m q4_0"; do
  set -- $sf
  timeout 150 ./flexkern synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1
  for r in 1 2; do for v in 0 2; do
    FLEXKERN_GEMV_L2AHEAD=$v timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >$O/t_$v.txt
    echo "$1 $2 decode128 [L2AHEAD=$v] $(grep -h -o 'decode:.*' $O/r.txt | tail -1 | cut -c1-40)"
  done; done
  cmp -s $O/t_0.txt $O/t_2.txt && echo "$1 $2: same text" || echo "$1 $2: TEXT DIFFERS"
  rm -f /tmp/b.gguf
done
date -u +%FT%TZ
