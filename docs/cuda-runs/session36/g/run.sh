#!/bin/bash
# Session 36 call g: Q6_K's low and high bits dotted where they lie (masked, dp4a.u32.s32, each
# sum shifted down once) (s36g) against e99e092 (s36f): verify, Q6_K GEMV and Q4_K_M decode A/B.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/g; mkdir -p $O
F=../../../../.devcarry/s36f/flexkern
G=../../../../.devcarry/s36g/flexkern
date -u +%FT%TZ > $O/verify.txt
timeout 150 $G verify --device cuda >> $O/verify.txt 2>&1; echo "verify rc=$?"; tail -2 $O/verify.txt
for r in 1 2; do for X in F G; do eval BIN=\$$X; echo "== $X round $r $(date -u +%T)" >> $O/bench.txt
  $BIN bench gemv --device cuda --graph --reps 20 --n 14336,4096 --k 4096 --formats q6_k >> $O/bench.txt 2>&1
  $BIN bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats q6_k >> $O/bench.txt 2>&1
done; done
$F synth-model --shape llama3-8b --format q4_k_m --tokenizer bytes --vocab 49152 --out /tmp/m.gguf > /dev/null 2>&1
for r in 1 2; do for X in F G; do eval BIN=\$$X
  $BIN run --device cuda --model /tmp/m.gguf --prompt "The three laws of robotics are" -n 128 --temperature 0 --ctx 160 > /tmp/o.txt 2>/tmp/e.txt
  echo "$X q4_k_m r$r: $(grep -v 'tok/s' /tmp/o.txt | md5sum | cut -c1-8) $(grep 'tok/s' /tmp/o.txt /tmp/e.txt | tail -1)" >> $O/decode.txt
done; done
