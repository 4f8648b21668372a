#!/bin/bash
# Session 36 call f: high nibbles dotted unshifted (dp4a.u32.s32 on w & 0xf0f0f0f0, the sum
# shifted back once a unit) in Q4_0, Q4_K and MLX 4-bit (s36f) against b84d255 (s36e):
# verify, GEMV and decode A/B.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/f; mkdir -p $O
E=../../../../.devcarry/s36e/flexkern
F=../../../../.devcarry/s36f/flexkern
date -u +%FT%TZ > $O/verify.txt
timeout 200 $F verify --device cuda >> $O/verify.txt 2>&1; echo "verify rc=$?"; tail -2 $O/verify.txt
for r in 1 2; do for X in E F; do eval BIN=\$$X; echo "== $X round $r $(date -u +%T)" >> $O/bench.txt
  $BIN bench gemv --device cuda --graph --reps 20 --n 14336,6144,4096 --k 4096 --formats q4_0,q4_k,mlx:4:64 >> $O/bench.txt 2>&1
  $BIN bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats q4_0,q4_k >> $O/bench.txt 2>&1
done; done
$F bench gemv --device cuda --graph --in-l2 --reps 20 --n 14336,4096 --k 4096 --formats q4_0,q4_k,mlx:4:64 >> $O/bench.txt 2>&1
for f in q4_0 q4_k_m; do $E synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/m_$f.gguf > /dev/null 2>&1; done
for r in 1 2; do for f in q4_0 q4_k_m; do for X in E F; do eval BIN=\$$X
  $BIN run --device cuda --model /tmp/m_$f.gguf --prompt "The three laws of robotics are" -n 128 --temperature 0 --ctx 160 > /tmp/o.txt 2>/tmp/e.txt
  echo "$X $f r$r: $(grep -v 'tok/s' /tmp/o.txt | md5sum | cut -c1-8) $(grep 'tok/s' /tmp/o.txt /tmp/e.txt | tail -1)" >> $O/decode.txt
done; done; done
