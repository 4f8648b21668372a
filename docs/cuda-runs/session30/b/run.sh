#!/bin/bash
# Session 30 call b: the launch-boundary study again (bench/micro/gemv_chain.cu), with launches
# held to two blocks an SM (padded shared memory) and in plain stream order beside PDL launches
# and the chain.
cd "$(dirname "$0")"
export PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/b; mkdir -p $O
date -u +%FT%TZ
nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/gc ../../../../bench/micro/gemv_chain.cu > $O/build.log 2>&1; echo "build rc=$?"; tail -5 $O/build.log
timeout 300 /tmp/gc > $O/chain.log 2>&1; echo "run rc=$?"
cat $O/chain.log
date -u +%FT%TZ
