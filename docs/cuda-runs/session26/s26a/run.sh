#!/bin/bash
# Session 26 call a: the bulk ring's depth, blocks per SM and units per stage, by knobs only.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s26a; mkdir -p $O
date -u +%FT%TZ
run() {
  env $1 timeout 60 ./flexkern bench gemv --device cuda --graph --reps 20 --formats q4_0,q4_k,q8_0 > $O/g.txt 2>&1
  echo "== $1" >> $O/gemv.txt; cat $O/g.txt >> $O/gemv.txt
  echo "$1: $(grep -E '^ *(q4_k|q4_0|q8_0) ' $O/g.txt | awk '{printf "%s %s %s %s | ", $1, $2, $6, $NF}')"
}
for s in "X=0" "FLEXKERN_GEMV_BULK=2" "FLEXKERN_GEMV_BULK=4" "FLEXKERN_GEMV_BULK=8" \
  "FLEXKERN_GEMV_FIT=1 FLEXKERN_GEMV_GRID=1 FLEXKERN_GEMV_BULK=4" \
  "FLEXKERN_GEMV_FIT=1 FLEXKERN_GEMV_GRID=1 FLEXKERN_GEMV_BULK=8" \
  "FLEXKERN_GEMV_FIT=2 FLEXKERN_GEMV_GRID=1 FLEXKERN_GEMV_BULK=2" \
  "FLEXKERN_GEMV_FIT=2 FLEXKERN_GEMV_GRID=1 FLEXKERN_GEMV_BULK=4" \
  "FLEXKERN_GEMV_FIT=1 FLEXKERN_GEMV_GRID=1 FLEXKERN_GEMV_BULK=6 FLEXKERN_GEMV_SUN=2" \
  "FLEXKERN_GEMV_BULK=3" "X=0"; do run "$s"; done
date -u +%FT%TZ
