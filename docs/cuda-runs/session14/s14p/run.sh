#!/bin/bash
# Session 14 call p (H100): the ring-streamed GEMV (Q6_K and the other formats without the
# register path) sized for four blocks per SM and launched with two. verify; bench gemv --graph
# and 8B Q4_K_M decode alternating the new plan with the old one (FLEXKERN_GEMV_FIT=3
# FLEXKERN_GEMV_GRID=3 restores it for the ring; the register path keeps two of two).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s14p; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 240 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -12; tail -1 $O/verify.txt
B() { # label env...
  local l=$1; shift
  env "$@" ./flexkern bench gemv --device cuda --graph --reps 20 --formats q6_k,q5_0,q4_1,iq4_xs,q3_k --n 14336,4096 --k 4096 > $O/g_$l.txt 2>&1
  env "$@" ./flexkern bench gemv --device cuda --graph --reps 20 --formats q6_k,q5_0 --n 4096 --k 14336 >> $O/g_$l.txt 2>&1
  echo "== $l"; grep -E "^(q6_k|q5_0|q4_1|iq4_xs|q3_k|copy)" $O/g_$l.txt | awk '{print $1,$2,$3,$4,$6}' | tr '\n' ';'; echo
}
for r in 1 2; do B new_$r X=1; B old_$r FLEXKERN_GEMV_FIT=3 FLEXKERN_GEMV_GRID=3; done
S="The three laws of robotics are"
for sf in "llama3-8b q4_k_m" "smollm2-135m q4_k_m"; do
  set -- $sf
  timeout 150 ./flexkern synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  for v in "X=1" "FLEXKERN_GEMV_FIT=3 FLEXKERN_GEMV_GRID=3"; do env $v timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1; done
  for r in 1 2; do for v in "X=1" "FLEXKERN_GEMV_FIT=3 FLEXKERN_GEMV_GRID=3"; do
    env $v timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >$O/t.txt
    echo "$1 $2 decode128 [$v] $(grep -h -o 'decode:.*' $O/r.txt | tail -1 | cut -c1-40)"
  done; done
  rm -f /tmp/b.gguf
done
date -u +%FT%TZ
