#!/bin/bash
# Session 36 call a: the GEMV's in-L2 ceiling (one copy launched 32 times) beside the HBM bench.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/a; mkdir -p $O
B=../../../../.devcarry/s36a/flexkern
F=q4_0,q8_0,q4_k,q6_k,f16
for r in 1 2; do
  $B bench gemv --device cuda --graph --reps 20 --n 14336,7168,4096 --k 4096 --formats $F >> $O/bench.txt 2>&1
  $B bench gemv --device cuda --graph --in-l2 --reps 20 --n 14336,7168,4096 --k 4096 --formats $F >> $O/bench.txt 2>&1
done
FLEXKERN_CUDA_TRACE=step $B bench gemv --device cuda --graph --reps 5 --n 14336,4096 --k 4096 --formats q4_0 >> $O/trace.txt 2>&1
FLEXKERN_CUDA_TRACE=step $B bench gemv --device cuda --graph --in-l2 --reps 5 --n 14336,4096 --k 4096 --formats q4_0 >> $O/trace.txt 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv >> $O/bench.txt
