#!/bin/bash
# Session 35 call h: 8B Q4_0 decode with the decode attention letting the next kernel launch as
# it starts (FLEXKERN_CUDA_ATTN_EARLY=1, s35f) and the output projection's whole share of each
# warp in a bulk ring filled before its wait (FLEXKERN_GEMV_BULK=2), apart and together.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/h; mkdir -p $O
B=../../../../.devcarry/s35f/flexkern
S="The three laws of robotics are"
date -u +%FT%TZ
timeout 150 $B synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/q4_0.gguf > /dev/null 2>&1
date -u +%FT%TZ
r() { # label env...
  local l=$1; shift
  env "$@" timeout 60 $B run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$l rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
}
for i in 1 2; do
r plan X=1; r early FLEXKERN_CUDA_ATTN_EARLY=1; r bulk2 FLEXKERN_GEMV_BULK=2; r early_bulk2 FLEXKERN_CUDA_ATTN_EARLY=1 FLEXKERN_GEMV_BULK=2
done
for v in "X=1" "FLEXKERN_CUDA_ATTN_EARLY=1 FLEXKERN_GEMV_BULK=2"; do
  env $v FLEXKERN_CUDA_TRACE=step timeout 60 $B run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 40 --temperature 0 --ctx 160 > /dev/null 2>> $O/trace.log; echo "== trace $v rc=$?" | tee -a $O/trace.log
done
grep -E "^== trace|after|attention|gemv" $O/trace.log | cut -c1-220 | head -40
date -u +%FT%TZ
