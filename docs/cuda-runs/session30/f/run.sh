#!/bin/bash
# Session 30 call f: where the product's GEMV prologues stand now: 8B Q4_0 step timelines with the
# release stamped at the wait's return (step) and after the activation prologue (step,prologue),
# two each, alternating; HEAD's binary (session 29's final).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/f; mkdir -p $O
F=../../../../.devcarry/s29l/flexkern
date -u +%FT%TZ
timeout 150 $F synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/q4_0.gguf > $O/synth.log 2>&1; echo "synth rc=$?"
S="The three laws of robotics are"
for r in 1 2; do for t in step step,prologue; do
  FLEXKERN_CUDA_TRACE=$t timeout 60 $F run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 40 --temperature 0 --ctx 160 > $O/out.log 2> $O/trace.log; echo "== $t round $r rc=$?"
  grep -E "fk_|step trace: [0-9]|replay" $O/trace.log | cut -c1-200 | head -10
  cat $O/trace.log >> $O/traces_$(echo $t | tr ',' '_').log
done; done
rm -f $O/out.log $O/trace.log
date -u +%FT%TZ
