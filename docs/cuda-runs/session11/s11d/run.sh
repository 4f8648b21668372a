#!/bin/bash
# Session 11 call d (H100): streamed GEMV with rows split evenly and Q8_K activations (dp4a) for
# Q4_K / Q6_K. verify; A/B against call c's binary (flexkern_c), alternated; 8B Q4_0 and Q4_K_M decode A/B.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s11d; mkdir -p $O
date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== verify"; timeout 170 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -20; tail -2 $O/verify.txt
F=q8_0,q4_0,q4_k,q6_k
for b in flexkern flexkern_c flexkern flexkern_c; do
  echo "== $b gemv"; timeout 60 ./$b bench gemv --device cuda --n 14336,4096,1024 --k 4096 --reps 20 --formats $F > $O/g.txt 2>&1; echo rc=$?
  grep -E "^(copy|q)" $O/g.txt | cut -c1-62
  timeout 60 ./$b bench gemv --device cuda --n 4096 --k 14336 --reps 20 --formats $F > $O/g.txt 2>&1; grep -E "^q" $O/g.txt | cut -c1-62
done
P="The three laws of robotics are"
for f in q4_0 q4_k_m; do
  echo "== 8B $f"; timeout 60 ./flexkern synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/m8.gguf > $O/synth.txt 2>&1; echo rc=$?
  for b in flexkern flexkern_c; do timeout 60 ./$b run --device cuda --model /tmp/m8.gguf --prompt "$P" -n 4 --temperature 0 --ctx 100 >/dev/null 2>&1; done
  for b in flexkern flexkern_c flexkern flexkern_c; do
    timeout 60 ./$b run --device cuda --model /tmp/m8.gguf --prompt "$P" -n 64 --temperature 0 --ctx 100 2>$O/r.txt >/dev/null; echo "$f $b rc=$? $(grep -h decode $O/r.txt | tail -1 | cut -c1-70)"
  done
done
