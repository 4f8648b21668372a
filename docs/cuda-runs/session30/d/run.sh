#!/bin/bash
# Session 30 call d: the launch-boundary study: activation prologues compared (per-thread loads,
# x bulk-copied then quantized, pre-quantized codes bulk-copied, none), first batch late.
cd "$(dirname "$0")"
export PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/d; mkdir -p $O
date -u +%FT%TZ
nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/gc ../../../../bench/micro/gemv_chain.cu > $O/build.log 2>&1; echo "build rc=$?"; tail -5 $O/build.log
timeout 300 /tmp/gc > $O/chain.log 2>&1; echo "run rc=$?"
cat $O/chain.log
date -u +%FT%TZ
