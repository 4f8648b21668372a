#!/bin/bash
# Session 26 call k: the down projection's shape (4096 x 14336) under the GEMV knobs.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s26k; mkdir -p $O
run() {
  env $1 timeout 60 ./flexkern bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats q4_0,q4_k,q6_k,q8_0 > $O/g.txt 2>&1
  echo "$1: $(grep -E '^ *(q4_k|q4_0|q8_0|q6_k) ' $O/g.txt | awk '{printf "%s %s %s %s | ", $1, $4, $6, substr($NF,6)}')"
}
for r in 1 2; do
for s in "X=0" "FLEXKERN_GEMV_FIT=3" "FLEXKERN_GEMV_FIT=3 FLEXKERN_GEMV_GRID=3" "FLEXKERN_GEMV_MINB=3" "FLEXKERN_GEMV_CLUSTER=1" "FLEXKERN_GEMV_CLUSTER=4" "FLEXKERN_GEMV_SUN=2" "FLEXKERN_GEMV_SUN=4" "FLEXKERN_GEMV_SUN=7" "FLEXKERN_GEMV_LANES=2" "FLEXKERN_GEMV_LANES=4" "FLEXKERN_GEMV_BULK=3" "FLEXKERN_GEMV_BULK=0"; do run "$s"; done
done
