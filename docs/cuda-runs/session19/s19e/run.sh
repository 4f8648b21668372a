#!/bin/bash
# Session 19 call e (H100): the decode step's timeline (FLEXKERN_CUDA_TRACE=step), after
# call d found every traced launch recompiling its module (a new module number per lookup).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s19e; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
for m in smollm2-135m:q4_0 llama3-8b:q4_0 llama3-8b:q4_k_m; do
  sh=${m%%:*}; fm=${m##*:}
  timeout 90 ./flexkern synth-model --shape $sh --format $fm --tokenizer bytes --vocab 49152 --out /tmp/m.gguf > /dev/null 2>&1; echo "synth $m rc=$?"
  FLEXKERN_CUDA_TRACE=step timeout 100 ./flexkern run --device cuda --model /tmp/m.gguf --prompt "$S" -n 48 --temperature 0 --ctx 160 > /dev/null 2> $O/step_$sh-$fm.txt; echo "step $m rc=$?"
  tr '\r' '\n' < $O/step_$sh-$fm.txt | grep -v "^\s*$" | grep -v "synth_unused" | cut -c1-240 | tail -24
  rm -f /tmp/m.gguf
done
date -u +%FT%TZ
