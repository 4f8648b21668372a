#!/bin/bash
# Session 30 call c: the launch-boundary study with per-block stamps (start, wait done, prologue
# done, end) and ways without the activation prologue (timing only).
cd "$(dirname "$0")"
export PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/c; mkdir -p $O
date -u +%FT%TZ
nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/gc ../../../../bench/micro/gemv_chain.cu > $O/build.log 2>&1; echo "build rc=$?"; tail -5 $O/build.log
timeout 300 /tmp/gc > $O/chain.log 2>&1; echo "run rc=$?"
cat $O/chain.log
date -u +%FT%TZ
