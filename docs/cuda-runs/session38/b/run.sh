#!/bin/bash
# Session 38 call b: each warp's second register batch loaded right after the programmatic-launch
# wait, beside the activation prologue (FK_SEARLY, s38c), against FLEXKERN_GEMV_EARLY=0 (the
# same binary as s38b): bench gemv, 8B decode alternating, step traces.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/b; mkdir -p $O
B=../../../../.devcarry/s38c/flexkern
bench() { # tag env...
  echo "== $1 $(date -u +%T)" >> $O/bench.txt; shift
  env "$@" $B bench gemv --device cuda --graph --reps 20 --n 14336,6144,4096 --k 4096 --formats q4_0,q4_k,q6_k,mlx:4:64 >> $O/bench.txt 2>&1
  env "$@" $B bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats q4_0,q6_k >> $O/bench.txt 2>&1
}
for f in q4_0 q4_k q6_k q8_0; do
  $B synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/m_$f.gguf > /dev/null 2>&1
done
$B synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s_q4_0.gguf > /dev/null 2>&1
dec() { # tag model env...
  local t=$1 m=$2; shift 2
  env "$@" $B run --device cuda --model $m --prompt "The three laws of robotics are" -n 128 --temperature 0 --ctx 160 > /tmp/o.txt 2>/tmp/e.txt
  echo "$t $(basename $m) $(grep -v 'tok/s' /tmp/o.txt | md5sum | cut -c1-8) $(grep 'tok/s' /tmp/o.txt /tmp/e.txt | tail -1 | sed 's/.*decode/decode/')" >> $O/decode.txt
}
bench off FLEXKERN_GEMV_EARLY=0
bench early X=1
for r in 1 2; do
  for m in /tmp/m_q4_0.gguf /tmp/m_q4_k.gguf /tmp/m_q6_k.gguf /tmp/m_q8_0.gguf /tmp/s_q4_0.gguf; do
    dec off $m FLEXKERN_GEMV_EARLY=0; dec early $m X=1
  done
done
bench off2 FLEXKERN_GEMV_EARLY=0
bench early2 X=1
for t in off early; do
  e=X=1; [ $t = off ] && e=FLEXKERN_GEMV_EARLY=0
  env $e FLEXKERN_CUDA_TRACE=step $B run --device cuda --model /tmp/m_q4_0.gguf --prompt "The three laws of robotics are" -n 40 --temperature 0 --ctx 160 > $O/trace_$t.txt 2>&1
done
for m in /tmp/m_q4_0.gguf /tmp/s_q4_0.gguf; do dec early $m X=1; dec off $m FLEXKERN_GEMV_EARLY=0; done
cat $O/decode.txt
grep -h "fk_gemv\|attention\|replay 32" $O/trace_*.txt | sed 's/.*replay 32/replay 32/' | cut -c1-200
