#!/bin/bash
# Session 30 call a: the launch-boundary study (bench/micro/gemv_chain.cu): the 8B decode step's
# 128 Q4_0 GEMVs as PDL launches in one graph against one persistent kernel with grid barriers;
# flexkern's own bench gemv (Q4_0, graph) beside it for calibration.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/a; mkdir -p $O
date -u +%FT%TZ
nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/gc ../../../../bench/micro/gemv_chain.cu > $O/build.log 2>&1; echo "build rc=$?"; tail -5 $O/build.log
timeout 300 /tmp/gc > $O/chain.log 2>&1; echo "run rc=$?"
cat $O/chain.log
date -u +%FT%TZ
for n in 14336 4096; do
  timeout 120 ../../../../.devcarry/s29l/flexkern bench gemv --device cuda --graph --reps 20 --n $n --k 4096 --formats q4_0 > $O/gemv_$n.log 2>&1; echo "gemv $n rc=$?"
  grep -v "^$" $O/gemv_$n.log | tail -6 | cut -c1-200
done
date -u +%FT%TZ
