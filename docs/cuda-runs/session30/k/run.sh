#!/bin/bash
# Session 30 call k: the stacked Q, K, V launch (RoPE and KV append in its epilogue) on the bulk
# ring (FLEXKERN_GEMV_BULK_STACK=0: its two stages issued before the wait) against its register
# batches; 8B Q4_0, alternating, three rounds (the greedy text's md5 must not move); traces.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/k; mkdir -p $O
F=../../../../.devcarry/s30k/flexkern
date -u +%FT%TZ
timeout 150 $F synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/q4_0.gguf > /dev/null 2>&1; echo "synth rc=$?"
S="The three laws of robotics are"
for r in 1 2 3; do for v in "X=1" "FLEXKERN_GEMV_BULK_STACK=0"; do
  env $v timeout 40 $F run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$v rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done
for v in "X=1" "FLEXKERN_GEMV_BULK_STACK=0"; do
  env $v FLEXKERN_CUDA_TRACE=step timeout 60 $F run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 40 --temperature 0 --ctx 160 > $O/out.log 2> $O/trace.log; echo "== trace $v rc=$?"
  grep -E "fk_gemv|step trace: [0-9]" $O/trace.log | cut -c1-200 | head -6
  cat $O/trace.log >> $O/traces.log
done
rm -f $O/out.log $O/trace.log
date -u +%FT%TZ
