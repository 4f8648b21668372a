#!/bin/bash
# Session 19 call a (H100): verify on the session's starting code (plus the opt-in block
# timeline), the decode bench, then the decode bench again with FLEXKERN_CUDA_TRACE=1 (block
# timelines), and with a largest partition of 1344 keys (two waves at B1 x 128k).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s19a; mkdir -p $O
date -u +%FT%TZ
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "^verify:|modules" $O/verify.txt | tail -3
timeout 60 ./flexkern bench attn --device cuda --only decode > $O/bench1.txt 2>&1; echo "bench1 rc=$?"
FLEXKERN_CUDA_TRACE=1 timeout 60 ./flexkern bench attn --device cuda --only decode > $O/trace1.txt 2>&1; echo "trace1 rc=$?"
FLEXKERN_CUDA_TRACE=1 FLEXKERN_CUDA_SPLIT=128,192,1344 timeout 60 ./flexkern bench attn --device cuda --only B1 > $O/trace1344.txt 2>&1; echo "trace1344 rc=$?"
FLEXKERN_CUDA_TRACE=1 timeout 60 ./flexkern bench attn --device cuda --only decode > $O/trace2.txt 2>&1; echo "trace2 rc=$?"
grep -E "trace:|^  |copy" $O/trace1.txt | cut -c1-400
grep -E "trace:|^  " $O/trace1344.txt | cut -c1-400
date -u +%FT%TZ
