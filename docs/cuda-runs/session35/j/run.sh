#!/bin/bash
# Session 35 call j: the closing binary (s35h = HEAD's release build). verify, memcheck quick,
# memcheck on a short SmolLM2 Q4_0 run, decode of 8B Q4_0 / Q8_0 / F16 and SmolLM2 Q4_0 (the
# greedy texts against earlier sessions'), verify-model on SmolLM2 Q4_0.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/j; mkdir -p $O
B=../../../../.devcarry/s35h/flexkern
S="The three laws of robotics are"
date -u +%FT%TZ
for a in "llama3-8b q4_0" "llama3-8b q8_0" "llama3-8b f16 f16" "smollm2-135m q4_0 s_q4_0"; do set -- $a
  (timeout 150 $B synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/${3:-$2}.gguf > /dev/null 2>&1 &); done
timeout 200 $B verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules|bad input|prepare_weight" $O/verify.log | cut -c1-200 | head -12
date -u +%FT%TZ
timeout 150 compute-sanitizer --tool memcheck $B verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
date -u +%FT%TZ
r() { timeout 60 $B run --device cuda --model /tmp/$1.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$1 rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"; }
for m in q4_0 q8_0 f16 s_q4_0 q4_0 s_q4_0; do r $m; done
timeout 120 compute-sanitizer --tool memcheck $B run --device cuda --model /tmp/s_q4_0.gguf --prompt "$S" -n 8 --temperature 0 --ctx 64 > /dev/null 2> $O/memcheck_run.log; echo "memcheck run rc=$?"; grep -E "ERROR SUMMARY" $O/memcheck_run.log
timeout 150 $B verify-model --device cuda --model /tmp/s_q4_0.gguf > $O/verify_model.log 2>&1; echo "verify-model rc=$?"; tail -3 $O/verify_model.log | cut -c1-250
date -u +%FT%TZ
