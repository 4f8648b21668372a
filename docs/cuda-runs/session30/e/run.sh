#!/bin/bash
# Session 30 call e: the launch-boundary study: L2 prefetch of 1, 2, 4 batches before the wait,
# pre-quantized codes in one bulk copy, with and without the prefetch.
cd "$(dirname "$0")"
export PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/e; mkdir -p $O
date -u +%FT%TZ
nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/gc ../../../../bench/micro/gemv_chain.cu > $O/build.log 2>&1; echo "build rc=$?"; tail -5 $O/build.log
timeout 300 /tmp/gc > $O/chain.log 2>&1; echo "run rc=$?"
cat $O/chain.log
date -u +%FT%TZ
