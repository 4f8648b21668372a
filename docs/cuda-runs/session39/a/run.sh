#!/bin/bash
# Session 39 call a: short launches on a bulk ring holding each warp's whole share (s39a,
# `Stream::with_whole_ring`; FLEXKERN_GEMV_WHOLE=0 is HEAD's plan): verify, then 8B decode
# alternating, both Q4_0 step traces, and bench gemv at the short shapes.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/a; mkdir -p $O
B=../../../../.devcarry/s39a/flexkern
$B verify --device cuda > $O/verify.txt 2>&1; echo "verify rc $?" >> $O/verify.txt
for f in q4_0 q8_0 q4_k_m; do
  $B synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/m_$f.gguf > /dev/null 2>&1
done
dec() { # tag model env...
  local t=$1 m=$2; shift 2
  env "$@" $B run --device cuda --model $m --prompt "The three laws of robotics are" -n 128 --temperature 0 --ctx 160 > /tmp/o.txt 2>/tmp/e.txt
  echo "$t $(basename $m) $(grep -v 'tok/s' /tmp/o.txt | md5sum | cut -c1-8) $(grep 'tok/s' /tmp/o.txt /tmp/e.txt | tail -1 | sed 's/.*decode/decode/')" >> $O/decode.txt
}
for r in 1 2; do
  for m in /tmp/m_q4_0.gguf /tmp/m_q8_0.gguf /tmp/m_q4_k_m.gguf; do
    dec "off r$r" $m FLEXKERN_GEMV_WHOLE=0; dec "whole r$r" $m X=1
  done
done
for t in off whole; do
  w=1; [ $t = off ] && w=0
  FLEXKERN_GEMV_WHOLE=$w FLEXKERN_CUDA_TRACE=step $B run --device cuda --model /tmp/m_q4_0.gguf --prompt "The three laws of robotics are" -n 40 --temperature 0 --ctx 160 2>&1 | grep -a "fk_gemv\|fk_attention\|replay 32" | sed 's/.*replay 32/replay 32/' > $O/trace_$t.txt
done
bench() { # tag env...
  local t=$1; shift
  echo "== $t" >> $O/bench.txt
  env "$@" $B bench gemv --device cuda --graph --reps 20 --n 4096,6144,14336 --k 4096 --formats q4_0,q8_0,q4_k >> $O/bench.txt 2>&1
}
for r in 1 2; do bench "off r$r" FLEXKERN_GEMV_WHOLE=0; bench "whole r$r" X=1; done
bench "whole c2" FLEXKERN_GEMV_CLUSTER=2
bench "bulk3" FLEXKERN_GEMV_BULK=3
bench "bulk4" FLEXKERN_GEMV_BULK=4
tail -3 $O/verify.txt
cat $O/decode.txt
cut -c1-230 $O/trace_*.txt
grep -a "^== \|^q\|^copy" $O/bench.txt | tr -s ' ' | cut -d' ' -f1-6,8 | head -90
