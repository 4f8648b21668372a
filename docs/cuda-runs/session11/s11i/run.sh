#!/bin/bash
# Session 11 call i (H100): the closing binary. verify, memcheck of verify --quick, bench gemv
# (streamed single rows) beside cuBLAS f16 (gemv_peers_cuda.py), decode of synthetic models.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s11i; mkdir -p $O
date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== verify"; timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -20; tail -2 $O/verify.txt
echo "== memcheck verify --quick"; timeout 170 compute-sanitizer --tool memcheck ./flexkern verify --device cuda --quick > $O/memcheck.txt 2>&1; echo rc=$?; grep -E "^verify|ERROR SUMMARY" $O/memcheck.txt | tail -3
echo "== gemv"; timeout 60 ./flexkern bench gemv --device cuda --n 14336,4096 --k 4096 --reps 20 --formats f16,q8_0,q4_0,q4_k,q6_k,q4_1,q5_k,iq4_xs > $O/gemv.txt 2>&1; echo rc=$?; grep -E "^(copy|f16|q|iq)" $O/gemv.txt | cut -c1-100
timeout 40 ./flexkern bench gemv --device cuda --n 4096 --k 14336 --reps 20 --formats q8_0,q4_0,q4_k,q6_k >> $O/gemv.txt 2>&1; grep -E "^q.* 14336 " $O/gemv.txt | cut -c1-100
echo "== cuBLAS peers"; PYTHONUNBUFFERED=1 timeout 60 python3 gemv_peers_cuda.py > $O/peers.txt 2>&1; echo rc=$?; tail -8 $O/peers.txt
P="The three laws of robotics are"
for s in llama3-8b:q4_0 smollm2-135m:q4_0 llama3-1b:q4_k_m llama3-8b:q8_0; do
  shape=${s%%:*}; f=${s##*:}
  timeout 50 ./flexkern synth-model --shape $shape --format $f --tokenizer bytes --vocab 49152 --out /tmp/m.gguf > $O/synth.txt 2>&1 || { echo "$s synth failed"; continue; }
  timeout 40 ./flexkern run --device cuda --model /tmp/m.gguf --prompt "$P" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1
  for i in 1 2; do
    timeout 40 ./flexkern run --device cuda --model /tmp/m.gguf --prompt "$P" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >/dev/null; echo "$shape $f rc=$? $(grep -h decode $O/r.txt | tail -1 | cut -c1-75)"
  done
done
