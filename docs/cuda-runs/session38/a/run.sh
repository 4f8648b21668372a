#!/bin/bash
# Session 38 call a: HEAD e3acff1's build (s38a) verified on the GPU (never run there), and the
# fused Q, K, V + RoPE launch with rows split a row at a time over a block's warps (s38b):
# verify, then 8B Q4_0 / Q4_K_M / Q6_K and SmolLM2 Q4_0 decode alternating, and both step traces.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/a; mkdir -p $O
A=../../../../.devcarry/s38a/flexkern
B=../../../../.devcarry/s38b/flexkern
$B verify --device cuda > $O/verify.txt 2>&1; echo "verify rc $?" >> $O/verify.txt
for f in q4_0 q4_k q6_k; do
  $B synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/m_$f.gguf > /dev/null 2>&1
done
$B synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s_q4_0.gguf > /dev/null 2>&1
dec() { # bin tag model
  $1 run --device cuda --model $3 --prompt "The three laws of robotics are" -n 128 --temperature 0 --ctx 160 > /tmp/o.txt 2>/tmp/e.txt
  echo "$2 $(basename $3) $(grep -v 'tok/s' /tmp/o.txt | md5sum | cut -c1-8) $(grep 'tok/s' /tmp/o.txt /tmp/e.txt | tail -1)" >> $O/decode.txt
}
for r in 1 2; do
  for m in /tmp/m_q4_0.gguf /tmp/m_q4_k.gguf /tmp/m_q6_k.gguf /tmp/s_q4_0.gguf; do
    dec $A a $m; dec $B b $m
  done
done
for t in a b; do
  bin=$A; [ $t = b ] && bin=$B
  FLEXKERN_CUDA_TRACE=step $bin run --device cuda --model /tmp/m_q4_0.gguf --prompt "The three laws of robotics are" -n 40 --temperature 0 --ctx 160 > $O/trace_$t.txt 2>&1
done
for r in 3; do
  for m in /tmp/m_q4_0.gguf /tmp/s_q4_0.gguf; do dec $B b $m; dec $A a $m; done
done
tail -3 $O/verify.txt
cat $O/decode.txt
grep -h "fk_gemv\|attention" $O/trace_*.txt | cut -c1-200
