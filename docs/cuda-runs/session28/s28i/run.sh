#!/bin/bash
# Session 28 call i (call h's binaries): SmolLM2's decode step with and without the padded
# exchange rows: step traces, then three rounds alternating.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s28i; mkdir -p $O
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1; echo "synth smollm2 rc=$?"
S="The three laws of robotics are"
for b in flexkern flexkern_e; do timeout 30 ./$b run --device cuda --model /tmp/s.gguf --prompt "$S" -n 8 --temperature 0 --ctx 160 > /dev/null 2>&1; done
for b in flexkern flexkern_e; do
  FLEXKERN_CUDA_TRACE=step timeout 60 ./$b run --device cuda --model /tmp/s.gguf --prompt "$S" -n 40 --temperature 0 --ctx 160 > $O/out.log 2> $O/trace.log; echo "trace $b rc=$?"
  grep -E "fk_attention|step trace: [0-9]" $O/trace.log | cut -c1-170 | head -3
  cat $O/trace.log >> $O/traces.log
done
for r in 1 2 3; do for b in flexkern flexkern_e; do
  timeout 30 ./$b run --device cuda --model /tmp/s.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "s $b rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done
date -u +%FT%TZ
