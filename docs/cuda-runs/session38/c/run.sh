#!/bin/bash
# Session 38 call c: decode attention's pipeline depth at a model step's short contexts
# (FLEXKERN_CUDA_MMA=tile,stages; the plan: 64 keys, 2 stages), s38b's build (04b8b6c's kernels).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/c; mkdir -p $O
B=../../../../.devcarry/s38b/flexkern
$B synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/m_q4_0.gguf > /dev/null 2>&1
$B synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s_q4_0.gguf > /dev/null 2>&1
dec() { # tag model env...
  local t=$1 m=$2; shift 2
  env "$@" $B run --device cuda --model $m --prompt "The three laws of robotics are" -n 128 --temperature 0 --ctx 160 > /tmp/o.txt 2>/tmp/e.txt
  echo "$t $(basename $m) $(grep -v 'tok/s' /tmp/o.txt | md5sum | cut -c1-8) $(grep 'tok/s' /tmp/o.txt /tmp/e.txt | tail -1 | sed 's/.*decode/decode/')" >> $O/decode.txt
}
for s in X=plan FLEXKERN_CUDA_MMA=64,3 FLEXKERN_CUDA_MMA=64,4 FLEXKERN_CUDA_MMA=128,2; do
  echo "== $s" >> $O/short.txt
  env $s $B bench attn --device cuda --only short >> $O/short.txt 2>&1
done
for r in 1 2; do
  for s in X=plan FLEXKERN_CUDA_MMA=64,3 FLEXKERN_CUDA_MMA=64,4 FLEXKERN_CUDA_MMA=128,2; do
    dec "$s" /tmp/m_q4_0.gguf $s; dec "$s" /tmp/s_q4_0.gguf $s
  done
done
for s in X=plan FLEXKERN_CUDA_MMA=64,4; do
  env $s FLEXKERN_CUDA_TRACE=step $B run --device cuda --model /tmp/m_q4_0.gguf --prompt "The three laws of robotics are" -n 40 --temperature 0 --ctx 160 > $O/trace_${s%%=*}.txt 2>&1
done
cat $O/decode.txt
grep -v "^$" $O/short.txt | cut -c1-160 | head -60
grep -h "attention\|replay 32" $O/trace_*.txt | sed 's/.*replay 32/replay 32/' | cut -c1-200
