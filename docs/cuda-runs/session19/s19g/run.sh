#!/bin/bash
# Session 19 call g (H100): the decode graph runs for the first time (KvCache::scaled counted
# every float cache as scaled since session 12, so every step ran eagerly). verify; the decode
# bench; per model: graph (default) against FLEXKERN_CUDA_GRAPH=0 alternating (speed and the
# greedy text, which must match); verify-model through the graph; the step timeline.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s19g; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "^verify:|modules" $O/verify.txt | tail -2
timeout 60 ./flexkern bench attn --device cuda --only decode > $O/bench.txt 2>&1; echo "bench rc=$?"; grep -E "^decode" $O/bench.txt | awk '{printf "%s ", $(NF-2)} END {print ""}'
for m in smollm2-135m:q4_0 llama3-8b:q4_0 llama3-8b:q4_k_m; do
  sh=${m%%:*}; fm=${m##*:}; L=$O/$sh-$fm.txt
  timeout 90 ./flexkern synth-model --shape $sh --format $fm --tokenizer bytes --vocab 49152 --out /tmp/m.gguf > /dev/null 2>&1; echo "synth $m rc=$?"
  for i in 1 2; do
    timeout 40 ./flexkern run --device cuda --model /tmp/m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > /tmp/g$i.txt 2>> $L; echo "$m graph rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1)"
    FLEXKERN_CUDA_GRAPH=0 timeout 40 ./flexkern run --device cuda --model /tmp/m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > /tmp/e$i.txt 2>> $L; echo "$m eager rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1)"
    cmp -s /tmp/g$i.txt /tmp/e$i.txt && echo "  same text ($(wc -c < /tmp/g$i.txt) bytes)" || echo "  TEXT DIFFERS"
  done
  if [ $sh = smollm2-135m ]; then
    for p in default precise; do timeout 90 ./flexkern verify-model --device cuda --gpu-path $p --model /tmp/m.gguf --tokens 64 >> $L 2>&1; echo "verify-model $p rc=$? $(grep '^verify-model:' $L | tail -1)"; done
  fi
  FLEXKERN_CUDA_TRACE=step timeout 100 ./flexkern run --device cuda --model /tmp/m.gguf --prompt "$S" -n 48 --temperature 0 --ctx 160 > /dev/null 2> $O/step_$sh-$fm.txt; echo "step $m rc=$?"
  tr '\r' '\n' < $O/step_$sh-$fm.txt | grep -v "^\s*$" | cut -c1-200 | head -22
  rm -f /tmp/m.gguf
done
date -u +%FT%TZ
