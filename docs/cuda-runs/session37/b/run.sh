#!/bin/bash
# Session 37 call b: Q6_K's codes in 32-weight units (layout.rs q6k_units: 24 bytes a unit, two
# loads) and its pipelined batches; whole register batches load unguarded (Q4_0, Q8_0, MLX,
# Q6_K); Q4_0 / Q4_K down projections on a three-stage bulk ring (s37b) against HEAD adf4138
# (s37a): verify, GEMV A/B, decode A/B.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/b; mkdir -p $O
A=../../../../.devcarry/s37a/flexkern
B=../../../../.devcarry/s37b/flexkern
date -u +%FT%TZ > $O/verify.txt
timeout 240 $B verify --device cuda >> $O/verify.txt 2>&1; echo "verify rc=$?"; tail -2 $O/verify.txt
for r in 1 2; do for X in A B; do eval BIN=\$$X; echo "== $X round $r $(date -u +%T)" >> $O/bench.txt
  $BIN bench gemv --device cuda --graph --reps 20 --n 14336,6144,4096 --k 4096 --formats q6_k,q4_0,q8_0,mlx:4:64,q4_k >> $O/bench.txt 2>&1
  $BIN bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats q6_k,q4_0,q4_k,q8_0 >> $O/bench.txt 2>&1
  $BIN bench gemv --device cuda --graph --reps 20 --n 49152 --k 4096 --formats q6_k >> $O/bench.txt 2>&1
done; done
for X in A B; do eval BIN=\$$X; echo "== $X in L2" >> $O/bench.txt
  $BIN bench gemv --device cuda --graph --in-l2 --reps 20 --n 14336,4096 --k 4096 --formats q6_k,q4_0 >> $O/bench.txt 2>&1
done
for f in q4_0 q4_k_m q6_k; do $A synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/m_$f.gguf > /dev/null 2>&1; done
for r in 1 2; do for f in q4_k_m q6_k q4_0; do for X in A B; do eval BIN=\$$X
  $BIN run --device cuda --model /tmp/m_$f.gguf --prompt "The three laws of robotics are" -n 128 --temperature 0 --ctx 160 > /tmp/o.txt 2>/tmp/e.txt
  echo "$X $f r$r: $(grep -v 'tok/s' /tmp/o.txt | md5sum | cut -c1-8) $(grep 'tok/s' /tmp/o.txt /tmp/e.txt | tail -1)" >> $O/decode.txt
done; done; done
cat $O/decode.txt
