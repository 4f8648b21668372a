#!/bin/bash
# Session 35 call e: the read ceiling again, with who reads which bytes (grid-stride chunks, rows a warp, rows a block)
# (bench/micro/read_ceiling.cu, a study outside flexkern).
cd "$(dirname "$0")"
export PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/e; mkdir -p $O
date -u +%FT%TZ
nvcc -O3 -std=c++17 -arch=sm_90a -o $O/rc ../../../../bench/micro/read_ceiling.cu && $O/rc > $O/read_ceiling.log 2>&1; echo "rc rc=$?"; cat $O/read_ceiling.log; rm -f $O/rc
date -u +%FT%TZ
