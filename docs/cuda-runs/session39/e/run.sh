#!/bin/bash
# Session 39 call e: the closing plan (s39e): Q6_K's bulk ring below 96 MiB of weights and
# three stages on its rows of 14336 (the down projection). verify, the Q6_K shapes against the
# register batches (scoped knob), and 8B Q6_K decode alternating.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/e; mkdir -p $O
B=../../../../.devcarry/s39e/flexkern
$B verify --device cuda > $O/verify.txt 2>&1; echo "verify rc $?" >> $O/verify.txt
REG="FLEXKERN_GEMV_BULK=14336x4096:0,4096x14336:0"
for r in 1 2; do
  for t in planned reg; do
    E=X=1; [ $t = reg ] && E=$REG
    echo "== $t r$r" >> $O/ab.txt
    env $E $B bench gemv --device cuda --graph --reps 20 --n 14336,49152 --k 4096 --formats q6_k >> $O/ab.txt 2>&1
    env $E $B bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats q6_k >> $O/ab.txt 2>&1
  done
done
$B synth-model --shape llama3-8b --format q6_k --tokenizer bytes --vocab 49152 --out /tmp/m.gguf > /dev/null 2>&1
for r in 1 2 3; do
  for t in planned reg; do
    E=X=1; [ $t = reg ] && E=$REG
    env $E $B run --device cuda --model /tmp/m.gguf --prompt "The three laws of robotics are" -n 128 --temperature 0 --ctx 160 > /tmp/o.txt 2>/tmp/e.txt
    echo "$t r$r $(grep -v 'tok/s' /tmp/o.txt | md5sum | cut -c1-8) $(grep 'tok/s' /tmp/o.txt /tmp/e.txt | tail -1 | sed 's/.*decode/decode/')" >> $O/decode.txt
  done
done
tail -3 $O/verify.txt
grep -a "^== \|^q" $O/ab.txt | tr -s ' ' | cut -d' ' -f1-6,8
cat $O/decode.txt
