#!/bin/bash
# Session 32 call i: the float formats' decode step (s32i) against the closing code so far
# (s32f): the residual add in the direct GEMV's epilogue (no add launch after wo and down) and
# RMSNorm with its weights loaded before the wait and the row held in registers. 8B F16,
# Q8_0, Q4_0 and SmolLM2 Q4_0 decode, alternating, two rounds; the F16 step trace on s32i;
# verify on s32i; memcheck on verify --quick and on a short SmolLM2 F16 run.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/i; mkdir -p $O
OLD=../../../../.devcarry/s32f/flexkern; NEW=../../../../.devcarry/s32i/flexkern
date -u +%FT%TZ
S="The three laws of robotics are"
for m in "llama3-8b f16" "llama3-8b q4_0" "smollm2-135m q4_0 s" "smollm2-135m f16 sf"; do set -- $m
  timeout 150 $NEW synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/${3:-$2}.gguf > /dev/null 2>&1; echo "synth ${3:-$2} rc=$?"; done
for r in 1 2; do for m in f16 q4_0 s; do for b in NEW OLD; do
  timeout 60 ${!b} run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$m $b rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done; done
date -u +%FT%TZ
FLEXKERN_CUDA_TRACE=step timeout 60 $NEW run --device cuda --model /tmp/f16.gguf --prompt "$S" -n 40 --temperature 0 --ctx 160 > $O/out.log 2> $O/trace.log; echo "== trace f16 rc=$?"
grep -E "fk_|replay [0-9]*:" $O/trace.log | cut -c1-200 | head -10
rm -f /tmp/f16.gguf /tmp/q4_0.gguf
date -u +%FT%TZ
timeout 200 $NEW verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules|rms_norm|y\+=" $O/verify.log | cut -c1-200 | head -24
date -u +%FT%TZ
timeout 150 compute-sanitizer --tool memcheck $NEW verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
timeout 120 compute-sanitizer --tool memcheck $NEW run --device cuda --model /tmp/sf.gguf --prompt "$S" -n 8 --temperature 0 --ctx 64 > $O/memcheck_run.log 2>&1; echo "memcheck run (SmolLM2 F16) rc=$?"; grep -E "ERROR SUMMARY|decode:" $O/memcheck_run.log | tail -2
rm -f $O/out.log
date -u +%FT%TZ
