#!/bin/bash
# Session 26 call c: the GEMV bench's graph timeline (FLEXKERN_CUDA_TRACE=step / step,prologue).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s26c; mkdir -p $O
date -u +%FT%TZ
for t in step step,prologue; do for k in 4096 14336; do
  FLEXKERN_CUDA_TRACE=$t timeout 60 ./flexkern bench gemv --device cuda --graph --reps 10 --n 4096,14336 --k $k --formats q4_0,q4_k,q6_k,q8_0,f16 > $O/t.txt 2>&1
  echo "== $t k$k"; grep -E "x $k:|fk_gemv|^ *(q4|q6|q8|f16)" $O/t.txt | cut -c1-200
done; done
FLEXKERN_GEMV_BULK=2 FLEXKERN_CUDA_TRACE=step,prologue timeout 60 ./flexkern bench gemv --device cuda --graph --reps 10 --n 4096,14336 --k 4096 --formats q4_k > $O/t.txt 2>&1
echo "== bulk2 prologue"; grep -E "x 4096:|fk_gemv|^ *(q4|q6|q8|f16)" $O/t.txt | cut -c1-200
date -u +%FT%TZ
