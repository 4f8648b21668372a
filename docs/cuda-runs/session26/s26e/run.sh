#!/bin/bash
# Session 26 call e: the GEMV bench's launches, block by block (start, wait return, end).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s26e; mkdir -p $O
for t in step step,prologue; do
FLEXKERN_CUDA_TRACE=$t timeout 60 ./flexkern bench gemv --device cuda --graph --reps 10 --n 14336,4096 --k 4096 --formats q4_0,q4_k,q8_0,q6_k > $O/t.txt 2>&1
echo "== $t"; grep -E "x 4096:|start|^ *(q4|q6|q8)" $O/t.txt | cut -c1-200
done
FLEXKERN_GEMV_BULK=2 FLEXKERN_CUDA_TRACE=step timeout 60 ./flexkern bench gemv --device cuda --graph --reps 10 --n 14336 --k 4096 --formats q4_k > $O/t.txt 2>&1
echo "== bulk2"; grep -E "x 4096:|start|^ *(q4|q6|q8)" $O/t.txt | cut -c1-200
