#!/bin/bash
# Session 29 call b: the streaming study with a stand-in for the attention math (bench/micro,
# DS_STUDY=1), beside the real decode kernel's B1 x 128k block timeline (session 28's code).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/b; mkdir -p $O
R=../../../..
date -u +%FT%TZ
nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/ds $R/bench/micro/decode_stream.cu -lcuda > $O/build.log 2>&1; echo "build rc=$?"; tail -5 $O/build.log
DS_STUDY=1 timeout 120 /tmp/ds > $O/study.log 2>&1; echo "study rc=$?"
cat $O/study.log
FLEXKERN_CUDA_TRACE=1 timeout 90 $R/.devcarry/s29b/flexkern bench attn --device cuda --only L131072 > $O/trace.log 2>&1; echo "trace rc=$?"
grep -v "^ *$" $O/trace.log | cut -c1-220 | head -60
date -u +%FT%TZ
