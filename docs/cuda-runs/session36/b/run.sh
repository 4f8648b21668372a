#!/bin/bash
# Session 36 call b: unguarded whole batches, per-lane activation offsets and split dp4a chains
# in the streamed GEMV (s36b) against the session's start (s36a): verify, GEMV A/B (HBM and
# in L2), 8B Q4_0 / Q4_K_M / Q8_0 decode A/B.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/b; mkdir -p $O
A=../../../../.devcarry/s36a/flexkern
B=../../../../.devcarry/s36b/flexkern
$B verify --device cuda > $O/verify.txt 2>&1; tail -3 $O/verify.txt
F=q4_0,q8_0,q4_k,q6_k,mlx:4:64,mlx:8:64
for r in 1 2; do
  for X in A B; do eval BIN=\$$X; echo "== $X round $r" >> $O/bench.txt
    $BIN bench gemv --device cuda --graph --reps 20 --n 14336,6144,4096 --k 4096 --formats $F >> $O/bench.txt 2>&1
    $BIN bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats q4_0,q4_k,q6_k,q8_0 >> $O/bench.txt 2>&1
  done
done
$B bench gemv --device cuda --graph --in-l2 --reps 20 --n 14336,4096 --k 4096 --formats $F >> $O/bench.txt 2>&1
for f in q4_0 q4_k_m q8_0; do $B synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/m_$f.gguf > /dev/null 2>&1; done
for r in 1 2; do for f in q4_0 q4_k_m q8_0; do for X in A B; do eval BIN=\$$X
  $BIN run --device cuda --model /tmp/m_$f.gguf --prompt "The three laws of robotics are" -n 128 --temperature 0 --ctx 160 > /tmp/o.txt 2>/tmp/e.txt
  echo "$X $f r$r: $(grep -v 'tok/s' /tmp/o.txt | md5sum | cut -c1-8) $(grep 'tok/s' /tmp/o.txt /tmp/e.txt | tail -1)" >> $O/decode.txt
done; done; done
