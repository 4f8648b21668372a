#!/bin/bash
# Session 26 call g: rows grabbed from 32 counters (FK_SDYN), the bulk ring without a static run fixed: bench A/B against FLEXKERN_GEMV_DYN=0
# and other static shares, the timeline, then verify.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s26g; mkdir -p $O
date -u +%FT%TZ
for r in 1 2; do for s in "X=0" "FLEXKERN_GEMV_DYN=0" "FLEXKERN_GEMV_DYN=50" "FLEXKERN_GEMV_DYN=90"; do for k in 4096 14336; do
  env $s timeout 60 ./flexkern bench gemv --device cuda --graph --reps 20 --n 4096,14336 --k $k --formats q4_0,q4_k,q6_k,q8_0 > $O/g.txt 2>&1
  echo "$s k$k: $(grep -E '^ *(q4_k|q4_0|q8_0|q6_k) ' $O/g.txt | awk '{printf "%s %s %s %s | ", $1, $2, $4, $6}')"
  grep -iE "error|panic" $O/g.txt | head -3
done; done; done
FLEXKERN_CUDA_TRACE=step timeout 60 ./flexkern bench gemv --device cuda --graph --reps 10 --n 14336 --k 4096 --formats q4_0,q4_k,q6_k > $O/t.txt 2>&1
grep -E "x 4096:|start|^ *(q4|q6|q8)" $O/t.txt | grep -v "kernel after" | cut -c1-200
date -u +%FT%TZ
timeout 300 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.txt | cut -c1-200 | head -20
date -u +%FT%TZ
