#!/bin/bash
# Session 38 call e: plain Q4_0 launches on the bulk ring quantize their activations with two
# lanes a 32-block (s38e) instead of one (s38d; call d's trace put 1.5-2 us between the
# activations' first load and the codes stored with one lane). bench gemv and decode alternating,
# then verify on s38e.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/e; mkdir -p $O
A=../../../../.devcarry/s38d/flexkern
B=../../../../.devcarry/s38e/flexkern
bench() { # tag bin env...
  local t=$1 bin=$2; shift 2
  echo "== $t" >> $O/bench.txt
  env "$@" $bin bench gemv --device cuda --graph --reps 20 --n 49152,14336,4096 --k 4096 --formats q4_0 >> $O/bench.txt 2>&1
  env "$@" $bin bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats q4_0 >> $O/bench.txt 2>&1
}
$A synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/m_q4_0.gguf > /dev/null 2>&1
$A synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s_q4_0.gguf > /dev/null 2>&1
dec() { # tag bin model
  $2 run --device cuda --model $3 --prompt "The three laws of robotics are" -n 128 --temperature 0 --ctx 160 > /tmp/o.txt 2>/tmp/e.txt
  echo "$1 $(basename $3) $(grep -v 'tok/s' /tmp/o.txt | md5sum | cut -c1-8) $(grep 'tok/s' /tmp/o.txt /tmp/e.txt | tail -1 | sed 's/.*decode/decode/')" >> $O/decode.txt
}
for r in 1 2; do
  bench "l1 r$r" $A X=1; bench "l2 r$r" $B X=1
done
bench "knob l4" $B FLEXKERN_GEMV_LANES=4
for r in 1 2 3; do
  for m in /tmp/m_q4_0.gguf /tmp/s_q4_0.gguf; do dec "l1 r$r" $A $m; dec "l2 r$r" $B $m; done
done
$B verify --device cuda > $O/verify.txt 2>&1; echo "verify rc $?" >> $O/verify.txt
cat $O/decode.txt
grep -a "^== \|^q4_0\|^copy" $O/bench.txt | tr -s ' ' | cut -d' ' -f1-6,8 | head -60
tail -3 $O/verify.txt
