#!/bin/bash
# Session 30 call i: the GEMV plan's switches in the 8B decode step (the study found the
# activation prologue waiting behind the weights already in flight): the bulk ring off
# (FLEXKERN_GEMV_BULK=0) or three stages, two-unit batches (SUN=2), against the default;
# 8B Q4_0 and Q4_K_M, alternating, two rounds; prologue-stamped traces of default and BULK=0.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/i; mkdir -p $O
F=../../../../.devcarry/s29l/flexkern
date -u +%FT%TZ
for m in q4_0 q4_k_m; do
  timeout 150 $F synth-model --shape llama3-8b --format $m --tokenizer bytes --vocab 49152 --out /tmp/$m.gguf > /dev/null 2>&1; echo "synth $m rc=$?"; done
S="The three laws of robotics are"
for r in 1 2; do for m in q4_0 q4_k_m; do for v in "X=1" "FLEXKERN_GEMV_BULK=0" "FLEXKERN_GEMV_BULK=3" "FLEXKERN_GEMV_SUN=2"; do
  env $v timeout 40 $F run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$m $v rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done; done
for v in "X=1" "FLEXKERN_GEMV_BULK=0"; do for t in step step,prologue; do
  env $v FLEXKERN_CUDA_TRACE=$t timeout 60 $F run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 40 --temperature 0 --ctx 160 > $O/out.log 2> $O/trace.log; echo "== trace $v $t rc=$?"
  grep -E "fk_gemv|step trace: [0-9]" $O/trace.log | cut -c1-200 | head -6
  cat $O/trace.log >> $O/traces.log
done; done
rm -f $O/out.log $O/trace.log
date -u +%FT%TZ
