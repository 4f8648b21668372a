#!/bin/bash
# Session 32 call h: where the 8B F16 and Q8_0 decode steps spend their time (step traces,
# FLEXKERN_CUDA_TRACE=step, the closing binary s32f), against the weight bytes of each launch.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/h; mkdir -p $O
F=../../../../.devcarry/s32f/flexkern
date -u +%FT%TZ
S="The three laws of robotics are"
for f in f16 q8_0; do
  timeout 150 $F synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/$f.gguf > /dev/null 2>&1; echo "synth $f rc=$?"
  FLEXKERN_CUDA_TRACE=step timeout 60 $F run --device cuda --model /tmp/$f.gguf --prompt "$S" -n 40 --temperature 0 --ctx 160 > $O/out.log 2> $O/trace.log; echo "== trace $f rc=$?"
  grep -E "fk_|step trace: [0-9]|replay [0-9]*:" $O/trace.log | cut -c1-200 | head -12
  cat $O/trace.log >> $O/traces.log
  rm -f /tmp/$f.gguf
done
timeout 30 $F bench attn --device cuda --only L131072 > $O/bw.log 2>&1; grep -E "^copy" $O/bw.log
rm -f $O/out.log $O/trace.log
date -u +%FT%TZ
