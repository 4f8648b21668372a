#!/bin/bash
# Session 28 call f (the closing binary e801eaf): does a deeper decode pipeline shorten the
# model step's short-context attention (FLEXKERN_CUDA_MMA=64,3 / 64,4: every tile of a 160-key
# sequence in flight at once)? 8B Q4_0 step traces and decode rounds; SmolLM2 decode.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s28f; mkdir -p $O
date -u +%FT%TZ
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1; echo "synth smollm2 rc=$?"
timeout 120 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/q4_0.gguf > /dev/null 2>&1; echo "synth 8b rc=$?"
date -u +%FT%TZ
S="The three laws of robotics are"
for mma in "" 64,3 64,4; do
  env ${mma:+FLEXKERN_CUDA_MMA=$mma} FLEXKERN_CUDA_TRACE=step timeout 60 ./flexkern run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 40 --temperature 0 --ctx 160 > $O/out.log 2> $O/trace_${mma:-default}.log; echo "trace [$mma] rc=$?"
  grep -E "fk_attention|step trace: [0-9]" $O/trace_${mma:-default}.log | cut -c1-170 | head -3
done
for r in 1 2; do for mma in "" 64,3 64,4; do for m in q4_0 s; do
  env ${mma:+FLEXKERN_CUDA_MMA=$mma} timeout 30 ./flexkern run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$m [$mma] rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done; done
date -u +%FT%TZ
