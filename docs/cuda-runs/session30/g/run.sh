#!/bin/bash
# Session 30 call g: the mma.sync attention kernel launched with programmatic dependent launch,
# its plan read before griddepcontrol.wait (new) against session 29's final binary (old):
# 8B Q4_0 and SmolLM2 Q4_0 decode, alternating, three rounds; a step trace of each.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/g; mkdir -p $O
NEW=../../../../.devcarry/s30g/flexkern; OLD=../../../../.devcarry/s29l/flexkern
date -u +%FT%TZ
for m in "llama3-8b q4_0" "smollm2-135m s"; do set -- $m
  timeout 150 $NEW synth-model --shape $1 --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/$2.gguf > /dev/null 2>&1; echo "synth $2 rc=$?"; done
S="The three laws of robotics are"
for r in 1 2 3; do for m in q4_0 s; do for b in NEW OLD; do
  timeout 40 ${!b} run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$m $b rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done; done
for b in NEW OLD; do for m in q4_0 s; do
  FLEXKERN_CUDA_TRACE=step timeout 60 ${!b} run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 40 --temperature 0 --ctx 160 > $O/out.log 2> $O/trace.log; echo "== trace $b $m rc=$?"
  grep -E "fk_attention|step trace: [0-9]|replay 32" $O/trace.log | cut -c1-200 | head -3
  cat $O/trace.log >> $O/traces_$b.log
done; done
rm -f $O/out.log $O/trace.log
date -u +%FT%TZ
