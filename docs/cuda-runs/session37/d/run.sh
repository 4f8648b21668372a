#!/bin/bash
# Session 37 call d: the candidate (s37c: Q6_K's unit layout, pipelined single Q6_K matrices,
# gate and up unrolled; whole register batches load unguarded; Q4_0 / Q4_K down projections on a
# three-stage bulk ring) against HEAD adf4138 (s37a): verify, GEMV and decode A/B, cuBLAS in
# the same call, memcheck on a short Q6_K run.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/d; mkdir -p $O
A=../../../../.devcarry/s37a/flexkern
C=../../../../.devcarry/s37c/flexkern
date -u +%FT%TZ > $O/verify.txt
timeout 240 $C verify --device cuda >> $O/verify.txt 2>&1; echo "verify rc=$?"; tail -2 $O/verify.txt
for r in 1 2; do for X in A C; do eval BIN=\$$X; echo "== $X round $r $(date -u +%T)" >> $O/bench.txt
  $BIN bench gemv --device cuda --graph --reps 20 --n 14336,6144,4096 --k 4096 --formats q6_k,q4_0,q8_0,q4_k,f16 >> $O/bench.txt 2>&1
  $BIN bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats q6_k,q4_0,q4_k >> $O/bench.txt 2>&1
done; done
PYTHONUNBUFFERED=1 timeout 120 python3 ../../../../bench/gemv_peers_cuda.py --graph > $O/peers.txt 2>&1; echo "peers rc=$?"
for f in q4_0 q4_k_m q6_k q8_0; do $A synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/m_$f.gguf > /dev/null 2>&1; done
$A synth-model --shape smollm2-135m --format q6_k --tokenizer bytes --vocab 49152 --out /tmp/m_s6.gguf > /dev/null 2>&1
for r in 1 2; do for f in q6_k q4_k_m q4_0 q8_0; do for X in A C; do eval BIN=\$$X
  $BIN run --device cuda --model /tmp/m_$f.gguf --prompt "The three laws of robotics are" -n 128 --temperature 0 --ctx 160 > /tmp/o.txt 2>/tmp/e.txt
  echo "$X $f r$r: $(grep -v 'tok/s' /tmp/o.txt | md5sum | cut -c1-8) $(grep 'tok/s' /tmp/o.txt /tmp/e.txt | tail -1)" >> $O/decode.txt
done; done; done
timeout 90 compute-sanitizer --tool memcheck $C run --device cuda --model /tmp/m_s6.gguf --prompt "The three laws" -n 8 --temperature 0 --ctx 64 > $O/memcheck.txt 2>&1; echo "memcheck run rc=$?"; tail -3 $O/memcheck.txt
cat $O/decode.txt
