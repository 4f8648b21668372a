#!/bin/bash
# Session 26 call b: Q4_K / Q6_K / Q4_0 plans by knobs, three row counts (the marginal rate).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s26b; mkdir -p $O
date -u +%FT%TZ
run() {
  env $1 timeout 60 ./flexkern bench gemv --device cuda --graph --reps 20 --n 4096,14336,28672 --k $2 --formats q4_0,q4_k,q6_k,q8_0 > $O/g.txt 2>&1
  echo "== $1 k$2" >> $O/gemv.txt; cat $O/g.txt >> $O/gemv.txt
  echo "$1 k$2: $(grep -E '^ *(q4_k|q4_0|q8_0|q6_k) ' $O/g.txt | awk '{printf "%s %s %s %s %s | ", $1, $2, $4, $6, substr($NF,6)}')"
}
for r in 1 2; do
for s in "X=0" "FLEXKERN_GEMV_BULK=2" "FLEXKERN_GEMV_CLUSTER=1" "FLEXKERN_GEMV_SUN=1" "FLEXKERN_GEMV_PIPE=0" "FLEXKERN_GEMV_BULK=2 FLEXKERN_GEMV_SUN=1"; do run "$s" 4096; done
done
for s in "X=0" "FLEXKERN_GEMV_BULK=2" "FLEXKERN_GEMV_CLUSTER=1"; do run "$s" 14336; done
date -u +%FT%TZ
