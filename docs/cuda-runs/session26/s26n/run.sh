#!/bin/bash
# Session 26 call n: do the same SMs end late launch after launch? (bench gemv --graph's timeline
# per SM, FLEXKERN_CUDA_TRACE=step).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s26n; mkdir -p $O
for f in q4_0 q4_k q6_k q8_0; do
FLEXKERN_CUDA_TRACE=step timeout 60 ./flexkern bench gemv --device cuda --graph --reps 10 --n 14336 --k 4096 --formats $f > $O/t_$f.txt 2>&1
echo "== $f"; grep -E "correlation|fastest|slowest|^ *(q4|q6|q8)" $O/t_$f.txt | cut -c1-230
done
FLEXKERN_CUDA_TRACE=step timeout 60 ./flexkern bench gemv --device cuda --graph --reps 10 --n 4096 --k 4096 --formats q4_0 > $O/t_small.txt 2>&1
echo "== q4_0 4096"; grep -E "correlation|fastest|slowest|^ *(q4|q6|q8)" $O/t_small.txt | cut -c1-230
