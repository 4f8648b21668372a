#!/bin/bash
# Session 34 call g: the streamed GEMV's pipelined batches ask L2 for FLEXKERN_GEMV_PF more
# batches right after the PDL wait (the previous kernel done), so the memory stays busy through
# the activation prologue (s34g: s34f plus the knob; none by default). bench gemv Q4_0 / Q8_0 /
# Q4_K at PF 0, 1, 2, 4; 8B Q4_0 and Q8_0 decode at PF 0, 1, 2 alternating.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/g; mkdir -p $O
B=../../../../.devcarry/s34g/flexkern
date -u +%FT%TZ
S="The three laws of robotics are"
for f in q4_0 q8_0; do timeout 150 $B synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/$f.gguf > /dev/null 2>&1 & done
g() { # label env...
  local l=$1; shift
  env "$@" timeout 100 $B bench gemv --device cuda --graph --reps 20 --n 4096,6144,14336 --k 4096 --formats q4_0,q8_0,q4_k > $O/gemv_$l.log 2>&1
  env "$@" timeout 100 $B bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats q4_0,q8_0,q4_k > $O/gemvk_$l.log 2>&1
  echo "== $l ($*)"; cat $O/gemv_$l.log $O/gemvk_$l.log | grep -E "^(q8_0|q4_0|q4_k) " | tr -s ' ' | cut -d' ' -f1-3,6,8
}
g pf0 X=1; g pf1 FLEXKERN_GEMV_PF=1; g pf2 FLEXKERN_GEMV_PF=2; g pf4 FLEXKERN_GEMV_PF=4; g pf0b X=1
wait
date -u +%FT%TZ
run() { # model label env...
  local m=$1 l=$2; shift 2
  env "$@" timeout 60 $B run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$m $l rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
}
P0="pf0 X=1"; P1="pf1 FLEXKERN_GEMV_PF=1"; P2="pf2 FLEXKERN_GEMV_PF=2"
for m in q4_0 q8_0; do run $m $P0; run $m $P1; run $m $P2; run $m $P2; run $m $P0; run $m $P1; run $m $P1; run $m $P2; run $m $P0; done
rm -f /tmp/q4_0.gguf /tmp/q8_0.gguf $O/out.log
date -u +%FT%TZ
