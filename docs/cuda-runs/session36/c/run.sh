#!/bin/bash
# Session 36 call c: Q8_K activation offsets fixed (s36c2: RoPE launches two units at a time
# unguarded; s36c3: RoPE launches guarded as before). verify c2; decode A / c2 / c3 with step
# traces; Q4_K / Q6_K GEMV A / c2.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/c; mkdir -p $O
A=../../../../.devcarry/s36a/flexkern
C2=../../../../.devcarry/s36c2/flexkern
C3=../../../../.devcarry/s36c3/flexkern
$C2 verify --device cuda > $O/verify.txt 2>&1; tail -2 $O/verify.txt
for f in q4_0 q8_0 q4_k_m; do $A synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/m_$f.gguf > /dev/null 2>&1; done
P="--prompt The_three_laws_of_robotics_are -n 128 --temperature 0 --ctx 160"
for r in 1 2; do for f in q4_0 q8_0 q4_k_m; do for X in A C2 C3; do eval BIN=\$$X
  $BIN run --device cuda --model /tmp/m_$f.gguf --prompt "The three laws of robotics are" -n 128 --temperature 0 --ctx 160 > /tmp/o.txt 2>/tmp/e.txt
  echo "$X $f r$r: $(grep -v 'tok/s' /tmp/o.txt | md5sum | cut -c1-8) $(grep 'tok/s' /tmp/o.txt /tmp/e.txt | tail -1)" >> $O/decode.txt
done; done; done
for X in A C2 C3; do eval BIN=\$$X; echo "== $X" >> $O/trace.txt
  FLEXKERN_CUDA_TRACE=step $BIN run --device cuda --model /tmp/m_q4_0.gguf --prompt "The three laws of robotics are" -n 16 --temperature 0 --ctx 160 >> $O/trace.txt 2>&1
done
for r in 1 2; do for X in A C2; do eval BIN=\$$X; echo "== $X round $r" >> $O/bench.txt
  $BIN bench gemv --device cuda --graph --reps 20 --n 14336,6144,4096 --k 4096 --formats q4_k,q6_k >> $O/bench.txt 2>&1
  $BIN bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats q4_k,q6_k >> $O/bench.txt 2>&1
done; done
