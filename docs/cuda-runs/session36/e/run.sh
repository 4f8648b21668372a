#!/bin/bash
# Session 36 call e: the closing code (s36e = b84d255's build; Q8_K batches back on the old
# form) against the session's start (s36a): verify, GEMV and decode A/B, memcheck.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/e; mkdir -p $O
A=../../../../.devcarry/s36a/flexkern
E=../../../../.devcarry/s36e/flexkern
date -u +%FT%TZ > $O/verify.txt
timeout 200 $E verify --device cuda >> $O/verify.txt 2>&1; echo "verify rc=$?"; tail -2 $O/verify.txt
for r in 1 2; do for X in A E; do eval BIN=\$$X; echo "== $X round $r $(date -u +%T)" >> $O/bench.txt
  $BIN bench gemv --device cuda --graph --reps 20 --n 14336,6144,4096 --k 4096 --formats q4_0,q8_0,q4_k,q6_k >> $O/bench.txt 2>&1
  $BIN bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats q4_0,q4_k >> $O/bench.txt 2>&1
done; done
for f in q4_0 q4_k_m; do $A synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/m_$f.gguf > /dev/null 2>&1; done
$A synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/m_s.gguf > /dev/null 2>&1
for r in 1 2; do for f in q4_0 q4_k_m; do for X in A E; do eval BIN=\$$X
  $BIN run --device cuda --model /tmp/m_$f.gguf --prompt "The three laws of robotics are" -n 128 --temperature 0 --ctx 160 > /tmp/o.txt 2>/tmp/e.txt
  echo "$X $f r$r: $(grep -v 'tok/s' /tmp/o.txt | md5sum | cut -c1-8) $(grep 'tok/s' /tmp/o.txt /tmp/e.txt | tail -1)" >> $O/decode.txt
done; done; done
timeout 60 compute-sanitizer --tool memcheck $E run --device cuda --model /tmp/m_s.gguf --prompt "The three laws" -n 8 --temperature 0 --ctx 64 > $O/memcheck.txt 2>&1; echo "memcheck run rc=$?"; tail -3 $O/memcheck.txt
timeout 170 compute-sanitizer --tool memcheck $E verify --device cuda --quick >> $O/memcheck.txt 2>&1; echo "memcheck verify rc=$?"; tail -3 $O/memcheck.txt
