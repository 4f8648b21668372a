#!/bin/bash
# Session 27 call i: each planar format's unit loads named once for global memory and the
# bulk ring (quant_blocks.cuh load_at). verify; memcheck on verify --quick; bench gemv --graph
# alternating with call f's binary (flexkern_f, 8af5f45), two rounds; 8B Q4_0 greedy text.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s27i; mkdir -p $O
date -u +%FT%TZ
(timeout 100 ./flexkern synth-model --shape llama3-8b --format q8_0 --tokenizer bytes --vocab 49152 --out /tmp/q8_0.gguf > /dev/null 2>&1; echo "synth q8_0 rc=$?") > $O/synth.log 2>&1 &
timeout 170 ./flexkern verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.log | cut -c1-160 | head -24
timeout 240 compute-sanitizer --tool memcheck ./flexkern verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
date -u +%FT%TZ
for r in 1 2; do for b in flexkern flexkern_f; do for k in 4096 14336; do
  timeout 40 ./$b bench gemv --device cuda --graph --reps 20 --n 4096,14336 --k $k --formats q4_0,q4_k,q8_0 > $O/g.log 2>&1
  echo "== $b round $r k$k" >> $O/gemv.log; cat $O/g.log >> $O/gemv.log
  echo "$b k$k: $(grep -E '^ *(q4_k|q4_0|q8_0|q6_k) ' $O/g.log | awk '{printf "%s %s %s | ", $1, $2, $6}')"
done; done; done
date -u +%FT%TZ
wait; cat $O/synth.log
S="The three laws of robotics are"
for r in 1 2; do for b in flexkern flexkern_f; do
  timeout 30 ./$b run --device cuda --model /tmp/q8_0.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "q8_0 $b rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done
date -u +%FT%TZ
