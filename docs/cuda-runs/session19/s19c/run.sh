#!/bin/bash
# Session 19 call c (H100): the decode step's own timeline (FLEXKERN_CUDA_TRACE=step: every
# block records start, wait return, end) for 8B Q4_0, 8B Q4_K_M and SmolLM2 Q4_0, beside
# plain runs; the decode attention bench of main's code (merge change, no tail split).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s19c; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 60 ./flexkern bench attn --device cuda --only decode > $O/bench1.txt 2>&1; echo "bench1 rc=$?"
for m in llama3-8b:q4_0 llama3-8b:q4_k_m smollm2-135m:q4_0; do
  sh=${m%%:*}; fm=${m##*:}
  timeout 90 ./flexkern synth-model --shape $sh --format $fm --tokenizer bytes --vocab 49152 --out /tmp/$sh-$fm.gguf > /dev/null 2>&1; echo "synth $m rc=$?"
  for i in 1 2; do timeout 40 ./flexkern run --device cuda --model /tmp/$sh-$fm.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > /dev/null 2> $O/run_$sh-$fm-$i.txt; echo "run $m rc=$? $(grep -o 'decode:.*' $O/run_$sh-$fm-$i.txt)"; done
  FLEXKERN_CUDA_TRACE=step timeout 60 ./flexkern run --device cuda --model /tmp/$sh-$fm.gguf --prompt "$S" -n 64 --temperature 0 --ctx 160 > /dev/null 2> $O/step_$sh-$fm.txt; echo "step $m rc=$?"
  grep -A40 "step trace" $O/step_$sh-$fm.txt | head -30
  rm -f /tmp/$sh-$fm.gguf
done
timeout 60 ./flexkern bench attn --device cuda --only decode > $O/bench2.txt 2>&1; echo "bench2 rc=$?"
for f in bench1 bench2; do echo "== $f"; grep -E "^decode" $O/$f.txt | awk '{printf "%s ", $(NF-2)} END {print ""}'; done
date -u +%FT%TZ
