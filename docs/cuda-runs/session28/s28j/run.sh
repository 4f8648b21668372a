#!/bin/bash
# Session 28 call j (427cdb7): the model step's short-context attention in blocks of 8 warps
# (FLEXKERN_CUDA_WARPS=8: keys split 8 ways, 128-key tiles) against 4; step traces of the 8B
# Q4_0 and SmolLM2 synths.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s28j; mkdir -p $O
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1; echo "synth smollm2 rc=$?"
timeout 120 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/q4_0.gguf > /dev/null 2>&1; echo "synth 8b rc=$?"
S="The three laws of robotics are"
for m in q4_0 s; do for w in 4 8; do
  FLEXKERN_CUDA_WARPS=$w FLEXKERN_CUDA_TRACE=step timeout 60 ./flexkern run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 40 --temperature 0 --ctx 160 > $O/out.log 2> $O/trace.log; echo "trace $m w$w rc=$? $(md5sum < $O/out.log | cut -c1-8)"
  grep -E "fk_attention|step trace: [0-9]" $O/trace.log | cut -c1-170 | head -3
  cat $O/trace.log >> $O/traces_$m.log
done; done
date -u +%FT%TZ
