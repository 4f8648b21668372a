#!/bin/bash
# Session 34 call e: the direct GEMV's unit loop unrolled (FLEXKERN_GEMV_DUNROLL=2|4 on s34e,
# s34d plus the knob): every load of 2 or 4 units a lane issued before their FMAs (SASS: 8 / 16
# 16-byte loads together in gate/up against 4). bench gemv F16 / BF16 plain, then 8B F16 and
# SmolLM2 F16 decode, rotating.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/e; mkdir -p $O
B=../../../../.devcarry/s34e/flexkern
date -u +%FT%TZ
S="The three laws of robotics are"
for m in "llama3-8b f16" "smollm2-135m f16 sf"; do set -- $m
  timeout 150 $B synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/${3:-$2}.gguf > /dev/null 2>&1 & done
g() { # label env...
  local l=$1; shift
  env "$@" timeout 100 $B bench gemv --device cuda --graph --reps 20 --n 4096,6144,14336 --k 4096 --formats f16,bf16 > $O/gemv_$l.log 2>&1
  env "$@" timeout 100 $B bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats f16 > $O/gemvk_$l.log 2>&1
  echo "== $l ($*)"; cat $O/gemv_$l.log $O/gemvk_$l.log | grep -E "^(f16|bf16) " | tr -s ' ' | cut -d' ' -f1-3,6
}
g u1 X=1; g u2 FLEXKERN_GEMV_DUNROLL=2; g u4 FLEXKERN_GEMV_DUNROLL=4; g u1b X=1
wait
date -u +%FT%TZ
run() { # model label env...
  local m=$1 l=$2; shift 2
  env "$@" timeout 60 $B run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$m $l rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
}
A="u1 X=1"; U2="u2 FLEXKERN_GEMV_DUNROLL=2"; U4="u4 FLEXKERN_GEMV_DUNROLL=4"
for m in f16 sf; do run $m $A; run $m $U2; run $m $U4; run $m $U4; run $m $A; run $m $U2; run $m $U2; run $m $U4; run $m $A; done
rm -f /tmp/f16.gguf /tmp/sf.gguf $O/out.log
date -u +%FT%TZ
