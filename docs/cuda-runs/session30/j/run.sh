#!/bin/bash
# Session 30 call j: the bulk ring's pre-wait depth for the smaller GEMVs (call i: the ring's two
# stages issued before the wait are worth 8 % of the 8B step on gate/up and down): the Q4_0 ring
# from 8 MB (the 8B step's wo too) or 0 bytes (SmolLM2's GEMVs too) against the 24 MB rule;
# 8B Q4_0 and SmolLM2 Q4_0, alternating, three rounds; step traces at 8 MB.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/j; mkdir -p $O
F=../../../../.devcarry/s30j/flexkern
date -u +%FT%TZ
for m in "llama3-8b q4_0" "smollm2-135m s"; do set -- $m
  timeout 150 $F synth-model --shape $1 --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/$2.gguf > /dev/null 2>&1; echo "synth $2 rc=$?"; done
S="The three laws of robotics are"
for r in 1 2 3; do for m in q4_0 s; do for v in "X=1" "FLEXKERN_GEMV_BULK_MIN=8388608" "FLEXKERN_GEMV_BULK_MIN=0"; do
  env $v timeout 40 $F run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$m $v rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done; done
for m in q4_0 s; do for v in "X=1" "FLEXKERN_GEMV_BULK_MIN=0"; do
  env $v FLEXKERN_CUDA_TRACE=step timeout 60 $F run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 40 --temperature 0 --ctx 160 > $O/out.log 2> $O/trace.log; echo "== trace $m $v rc=$?"
  grep -E "fk_gemv|step trace: [0-9]" $O/trace.log | cut -c1-200 | head -6
  cat $O/trace.log >> $O/traces.log
done; done
rm -f $O/out.log $O/trace.log
date -u +%FT%TZ
