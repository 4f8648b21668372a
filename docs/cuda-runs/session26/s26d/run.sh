#!/bin/bash
# Session 26 call d: diagnostic. flexkern_early runs the activation prologue before the wait for
# the previous kernel (wrong in a model, right in the bench: X never changes), so its gain over
# flexkern bounds what a free prologue would give.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s26d; mkdir -p $O
date -u +%FT%TZ
for r in 1 2; do for b in flexkern flexkern_early; do for k in 4096 14336; do
  timeout 60 ./$b bench gemv --device cuda --graph --reps 20 --n 4096,14336 --k $k --formats q4_0,q4_k,q6_k,q8_0 > $O/g.txt 2>&1
  echo "$b k$k: $(grep -E '^ *(q4_k|q4_0|q8_0|q6_k) ' $O/g.txt | awk '{printf "%s %s %s %s | ", $1, $2, $4, $6}')"
done; done; done
FLEXKERN_CUDA_TRACE=step timeout 60 ./flexkern_early bench gemv --device cuda --graph --reps 10 --n 14336 --k 4096 --formats q4_0,q4_k > $O/t.txt 2>&1
grep -A2 "x 4096:" $O/t.txt | cut -c1-200
FLEXKERN_CUDA_TRACE=step timeout 60 ./flexkern bench gemv --device cuda --graph --reps 10 --n 14336 --k 4096 --formats q4_0,q4_k > $O/t.txt 2>&1
grep -A2 "x 4096:" $O/t.txt | cut -c1-200
date -u +%FT%TZ
