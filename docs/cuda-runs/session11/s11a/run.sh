#!/bin/bash
# Session 11 call a (H100): the streamed single-row GEMV. bench gemv A/B/A (FLEXKERN_GEMV_STREAM=1/0/1),
# K 14336, f32 activations (--precise), verify --device cuda, 8B Q4_0 decode A/B/A.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s11a; mkdir -p $O
date -u +%FT%TZ > $O/date.txt; nvidia-smi --query-gpu=name,driver_version --format=csv >> $O/date.txt; cat $O/date.txt
F=f16,q8_0,q4_0,q4_1,q5_0,q4_k,q5_k,q6_k,q2_k,q3_k,iq4_xs
for s in 1 0 1; do
  echo "== gemv K4096 stream=$s"; FLEXKERN_GEMV_STREAM=$s timeout 100 ./flexkern bench gemv --device cuda --n 14336,4096 --k 4096 --reps 20 --formats $F > $O/gemv_k4096_s$s.$RANDOM.txt 2>&1; echo rc=$?
  grep -E "^(copy|f16|q|iq)" $(ls -t $O/gemv_k4096_s$s.* | head -1) | cut -c1-100
done
echo "== verify"; timeout 170 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -20; tail -2 $O/verify.txt
for s in 1 0; do
  echo "== gemv N4096 K14336 stream=$s"; FLEXKERN_GEMV_STREAM=$s timeout 60 ./flexkern bench gemv --device cuda --n 4096 --k 14336 --reps 20 --formats q8_0,q4_0,q4_k,q6_k > $O/gemv_k14336_s$s.txt 2>&1; echo rc=$?
  grep -E "^(copy|q)" $O/gemv_k14336_s$s.txt | cut -c1-100
done
echo "== precise (f32 activations) stream=1"; FLEXKERN_GEMV_STREAM=1 timeout 60 ./flexkern bench gemv --device cuda --precise --n 14336,4096 --k 4096 --reps 20 --formats q8_0,q4_0 > $O/gemv_precise.txt 2>&1; echo rc=$?; grep -E "^(copy|q)" $O/gemv_precise.txt | cut -c1-100
echo "== 8B q4_0"; timeout 60 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/m8.gguf > $O/synth.txt 2>&1; echo rc=$?; tail -1 $O/synth.txt
P="The three laws of robotics are"
timeout 60 ./flexkern run --device cuda --model /tmp/m8.gguf --prompt "$P" -n 4 --temperature 0 --ctx 100 >/dev/null 2>&1
for s in 1 0 1 0; do
  FLEXKERN_GEMV_STREAM=$s timeout 60 ./flexkern run --device cuda --model /tmp/m8.gguf --prompt "$P" -n 64 --temperature 0 --ctx 100 2>$O/run8b_s$s.$RANDOM.txt >/dev/null; echo "stream=$s rc=$? $(grep -h decode $(ls -t $O/run8b_s$s.* | head -1) | tail -1)"
done
