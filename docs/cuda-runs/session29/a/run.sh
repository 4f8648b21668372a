#!/bin/bash
# Session 29 call a: the K/V streaming ceiling study (bench/micro/decode_stream.cu): cp.async
# per thread against TMA boxes on an mbarrier ring, B1 x 128k's shape, contiguous and paged 16.
cd "$(dirname "$0")"
export PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/a; mkdir -p $O
date -u +%FT%TZ
nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/ds ../../../../bench/micro/decode_stream.cu -lcuda > $O/build.log 2>&1; echo "build rc=$?"; tail -5 $O/build.log
timeout 200 /tmp/ds > $O/stream.log 2>&1; echo "run rc=$?"
cat $O/stream.log
date -u +%FT%TZ
