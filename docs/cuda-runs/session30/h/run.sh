#!/bin/bash
# Session 30 call h: the PDL attention launch with its blocks spread one an SM (padded shared
# memory, FLEXKERN_CUDA_ATTN_PDL=pad) against the plain PDL launch (default) and none (=0):
# 8B Q4_0 and SmolLM2 Q4_0 decode, alternating, two rounds; step traces of pad.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/h; mkdir -p $O
F=../../../../.devcarry/s30h/flexkern
date -u +%FT%TZ
for m in "llama3-8b q4_0" "smollm2-135m s"; do set -- $m
  timeout 150 $F synth-model --shape $1 --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/$2.gguf > /dev/null 2>&1; echo "synth $2 rc=$?"; done
S="The three laws of robotics are"
for r in 1 2; do for m in q4_0 s; do for v in 0 1 pad; do
  FLEXKERN_CUDA_ATTN_PDL=$v timeout 40 $F run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$m pdl=$v rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done; done
for m in q4_0 s; do
  FLEXKERN_CUDA_ATTN_PDL=pad FLEXKERN_CUDA_TRACE=step timeout 60 $F run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 40 --temperature 0 --ctx 160 > $O/out.log 2> $O/trace.log; echo "== trace pad $m rc=$?"
  grep -E "fk_attention|fk_gemv" $O/trace.log | cut -c1-200 | head -8
  cat $O/trace.log >> $O/traces_pad.log
done
rm -f $O/out.log $O/trace.log
date -u +%FT%TZ
