#!/bin/bash
# Session 24 call g (H200), the closing code (fd647f5) against session 23's closing GPU code
# (3228586): 8B Q4_0 / Q4_K_M / Q8_0 and SmolLM2 decode alternating, two rounds; the Q4_0 step.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s24g; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
L=$O/runs.txt
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/smollm2.gguf > /dev/null 2>&1
for m in q4_0 q4_k_m q8_0; do timeout 150 ./flexkern synth-model --shape llama3-8b --format $m --tokenizer bytes --vocab 49152 --out /tmp/$m.gguf > /dev/null 2>&1; echo "synth $m rc=$?"; done
date -u +%FT%TZ
for m in q4_0 q4_k_m q8_0 smollm2; do for r in 1 2; do for b in flexkern flexkern_s23; do
  timeout 40 ./$b run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $L; echo "$m $b rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done; done
date -u +%FT%TZ
FLEXKERN_CUDA_TRACE=step timeout 60 ./flexkern run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 64 --temperature 0 --ctx 160 > $O/trace_q4_0.txt 2>&1; echo "trace rc=$?"; grep -E "^\s+fk_|launches" $O/trace_q4_0.txt | cut -c1-150 | head -9
date -u +%FT%TZ
