#!/bin/bash
# Session 25 call g (H200): pipelined register batches two ahead (FLEXKERN_GEMV_AHEAD=2) against
# one. verify with two ahead; bench gemv --graph (Q4_K, Q4_0, Q8_0) alternating, two rounds;
# 8B Q4_K_M decode alternating, two rounds.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s25g; mkdir -p $O
date -u +%FT%TZ
(timeout 150 ./flexkern synth-model --shape llama3-8b --format q4_k_m --tokenizer bytes --vocab 49152 --out /tmp/q4_k_m.gguf > /dev/null 2>&1; echo "synth rc=$?" > $O/synth.txt) &
FLEXKERN_GEMV_AHEAD=2 timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify (ahead 2) rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.txt | cut -c1-160 | head -20
date -u +%FT%TZ
for r in 1 2; do for a in 1 2; do
  FLEXKERN_GEMV_AHEAD=$a timeout 90 ./flexkern bench gemv --device cuda --graph --reps 20 --formats q4_k,q4_0,q8_0 > $O/g.txt 2>&1
  echo "== ahead $a" >> $O/gemv.txt; cat $O/g.txt >> $O/gemv.txt
  echo "ahead $a: $(grep -E '^ *(q4_k|q4_0|q8_0) ' $O/g.txt | awk '{printf "%s %s %s | ", $1, $2, $6}')"
done; done
date -u +%FT%TZ
wait; cat $O/synth.txt
S="The three laws of robotics are"
L=$O/runs.txt
for r in 1 2; do for a in 1 2; do
  FLEXKERN_GEMV_AHEAD=$a timeout 40 ./flexkern run --device cuda --model /tmp/q4_k_m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $L; echo "q4_k_m ahead $a rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done
date -u +%FT%TZ
grep -E "copy|q4_k|q4_0|q8_0" $O/g.txt | head -12 | cut -c1-150
