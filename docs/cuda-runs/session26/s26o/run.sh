#!/bin/bash
# Session 26 call o: blocks of 16 warps (one an SM) or 4 warps (four an SM) against two of 8:
# are the two blocks on an SM ending apart what spreads the launch's end?
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s26o; mkdir -p $O
run() {
  env $1 timeout 60 ./flexkern bench gemv --device cuda --graph --reps 20 --n 4096,14336 --k $2 --formats q4_0,q4_k,q6_k,q8_0 > $O/g.txt 2>&1
  echo "$1 k$2: $(grep -E '^ *(q4_k|q4_0|q8_0|q6_k) ' $O/g.txt | awk '{printf "%s %s %s | ", $1, $2, $6}')"
}
for r in 1 2; do for s in "X=0" "FLEXKERN_GEMV_WARPS=16 FLEXKERN_GEMV_FIT=1" "FLEXKERN_GEMV_WARPS=4 FLEXKERN_GEMV_FIT=4"; do for k in 4096 14336; do run "$s" $k; done; done; done
FLEXKERN_GEMV_WARPS=16 FLEXKERN_GEMV_FIT=1 FLEXKERN_CUDA_TRACE=step timeout 60 ./flexkern bench gemv --device cuda --graph --reps 10 --n 14336 --k 4096 --formats q4_0,q6_k > $O/t.txt 2>&1
grep -E "x 4096:|start|correlation" $O/t.txt | grep -v "kernel after" | cut -c1-200
