#!/bin/bash
# Session 34 call c: call b found units per batch and blocks an SM that beat the plan at some
# shapes (Q4_0 4096 x 4096 SUN 2 48 against 44 %, Q8_0 FIT 4 + SUN 2 70.5 against 67, Q6_K
# 14336 SUN 2 69 against 67). Here the same knobs across the decode step's shapes (n 4096,
# 6144, 14336, 28672 at k 4096; 4096 x 14336), then 8B Q4_0 / Q8_0 decode with them applied
# to every launch, alternating. HEAD's binary (s33g).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/c; mkdir -p $O
B=../../../../.devcarry/s33g/flexkern
date -u +%FT%TZ
S="The three laws of robotics are"
for f in q4_0 q8_0; do timeout 150 $B synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/$f.gguf > /dev/null 2>&1 & done; wait
g() { # label formats env...
  local l=$1 f=$2; shift 2
  env "$@" timeout 100 $B bench gemv --device cuda --graph --reps 20 --n 4096,6144,14336,28672 --k 4096 --formats $f > $O/gemv_$l.log 2>&1
  env "$@" timeout 100 $B bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats $f > $O/gemvk_$l.log 2>&1
  echo "== $l ($*)"; cat $O/gemv_$l.log $O/gemvk_$l.log | grep -E "^(q8_0|q4_0|q4_k|q6_k) " | tr -s ' ' | cut -d' ' -f1-3,6
}
F=q4_0,q8_0,q6_k,q4_k
g def1 $F X=1
g s2 $F FLEXKERN_GEMV_SUN=2
g f4s2 $F FLEXKERN_GEMV_FIT=4 FLEXKERN_GEMV_SUN=2
g f3s2 q8_0,q6_k FLEXKERN_GEMV_FIT=3 FLEXKERN_GEMV_SUN=2
g f4s1 q8_0 FLEXKERN_GEMV_FIT=4 FLEXKERN_GEMV_SUN=1
g def2 $F X=1
date -u +%FT%TZ
run() { # model label env...
  local m=$1 l=$2; shift 2
  env "$@" timeout 60 $B run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$m $l rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
}
for r in 1 2; do
  run q4_0 def X=1; run q4_0 s2 FLEXKERN_GEMV_SUN=2; run q4_0 f4s2 FLEXKERN_GEMV_FIT=4 FLEXKERN_GEMV_SUN=2
  run q8_0 def X=1; run q8_0 s2 FLEXKERN_GEMV_SUN=2; run q8_0 f4s2 FLEXKERN_GEMV_FIT=4 FLEXKERN_GEMV_SUN=2
done
rm -f /tmp/q4_0.gguf /tmp/q8_0.gguf $O/out.log
date -u +%FT%TZ
