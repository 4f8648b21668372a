#!/bin/bash
# Session 34 call f: the planned unroll (s34f: choose::direct_unroll, two units a lane for
# single rows of F16 / BF16; the fused norm's loads first) against session 33's closing binary
# (s33g). verify, bench gemv F16 / BF16 / F32, blocks-per-SM probes at 6144 rows, 8B F16 and
# BF16 and SmolLM2 F16 decode alternating, verify-model, memcheck.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/f; mkdir -p $O
OLD=../../../../.devcarry/s33g/flexkern; NEW=../../../../.devcarry/s34f/flexkern
date -u +%FT%TZ
S="The three laws of robotics are"
for m in "llama3-8b f16" "llama3-8b bf16" "smollm2-135m f16 sf"; do set -- $m
  timeout 150 $NEW synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/${3:-$2}.gguf > /dev/null 2>&1 & done
timeout 200 $NEW verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules|bad input" $O/verify.log | cut -c1-200 | head -10
date -u +%FT%TZ
g() { # label binary shapes env...
  local l=$1 b=$2 n=$3 k=$4; shift 4
  env "$@" timeout 100 ${!b} bench gemv --device cuda --graph --reps 20 --n $n --k $k --formats f16,bf16,f32 > $O/gemv_$l.log 2>&1
  echo "== $l $b ($*)"; grep -E "^(copy|f16|bf16|f32) " $O/gemv_$l.log | tr -s ' ' | cut -d' ' -f1-3,6,8
}
g new NEW 4096,6144,14336 4096 X=1; g newk NEW 4096 14336 X=1; g old OLD 4096,6144,14336 4096 X=1
for b in 2 3 6 8; do g minb$b NEW 6144 4096 FLEXKERN_GEMV_MINB=$b; done
wait
date -u +%FT%TZ
run() { # binary model label env...
  local b=$1 m=$2 l=$3; shift 3
  env "$@" timeout 60 ${!b} run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$m $b rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
}
for m in f16 bf16 f16 sf bf16 sf f16; do run OLD $m old X=1; run NEW $m new X=1; done
rm -f /tmp/f16.gguf /tmp/bf16.gguf $O/out.log
date -u +%FT%TZ
timeout 90 $NEW verify-model --device cuda --model /tmp/sf.gguf > $O/vm.txt 2>&1; echo "verify-model (SmolLM2 F16) rc=$?"; tail -1 $O/vm.txt
timeout 120 compute-sanitizer --tool memcheck $NEW verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
timeout 120 compute-sanitizer --tool memcheck $NEW run --device cuda --model /tmp/sf.gguf --prompt "$S" -n 8 --temperature 0 --ctx 64 > $O/memcheck_run.log 2>&1; echo "memcheck run (SmolLM2 F16) rc=$?"; grep -E "ERROR SUMMARY|decode:" $O/memcheck_run.log | tail -2
rm -f /tmp/sf.gguf
date -u +%FT%TZ
