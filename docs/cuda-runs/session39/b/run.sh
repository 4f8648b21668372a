#!/bin/bash
# Session 39 call b: weights asked for after the activations' loads rather than before the wait
# (s39b, FK_SLATE by FLEXKERN_GEMV_LATE=n; 0 is HEAD's kernel): bench gemv and 8B decode
# alternating, and the Q4_0 step trace with LATE=1.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/b; mkdir -p $O
B=../../../../.devcarry/s39b/flexkern
bench() { # tag env...
  local t=$1; shift
  echo "== $t" >> $O/bench.txt
  env "$@" $B bench gemv --device cuda --graph --reps 20 --n 4096,14336 --k 4096 --formats q4_0,q4_k,q6_k,q8_0 >> $O/bench.txt 2>&1
  env "$@" $B bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats q4_0,q4_k,q6_k >> $O/bench.txt 2>&1
}
for r in 1 2; do for l in 0 1 2; do bench "late$l r$r" FLEXKERN_GEMV_LATE=$l; done; done
for f in q4_0 q4_k_m; do
  $B synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/m_$f.gguf > /dev/null 2>&1
done
dec() { # tag model env...
  local t=$1 m=$2; shift 2
  env "$@" $B run --device cuda --model $m --prompt "The three laws of robotics are" -n 128 --temperature 0 --ctx 160 > /tmp/o.txt 2>/tmp/e.txt
  echo "$t $(basename $m) $(grep -v 'tok/s' /tmp/o.txt | md5sum | cut -c1-8) $(grep 'tok/s' /tmp/o.txt /tmp/e.txt | tail -1 | sed 's/.*decode/decode/')" >> $O/decode.txt
}
for r in 1 2; do
  for m in /tmp/m_q4_0.gguf /tmp/m_q4_k_m.gguf; do
    dec "late0 r$r" $m FLEXKERN_GEMV_LATE=0; dec "late1 r$r" $m FLEXKERN_GEMV_LATE=1
  done
done
FLEXKERN_GEMV_LATE=1 FLEXKERN_CUDA_TRACE=step $B run --device cuda --model /tmp/m_q4_0.gguf --prompt "The three laws of robotics are" -n 40 --temperature 0 --ctx 160 2>&1 | grep -a "fk_gemv\|fk_attention\|replay 32" | sed 's/.*replay 32/replay 32/' > $O/trace_late1.txt
cat $O/decode.txt
cut -c1-230 $O/trace_*.txt
grep -a "^== \|^q" $O/bench.txt | tr -s ' ' | cut -d' ' -f1-6,8 | head -120
