#!/bin/bash
# Session 24 call i (H200): verify and the GEMV bench on HEAD (bd21cb8: fd647f5's kernels, one
# blank line apart).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s24i; mkdir -p $O
date -u +%FT%TZ
timeout 100 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E " fail" $O/verify.txt | head -5; tail -2 $O/verify.txt
timeout 40 ./flexkern bench gemv --device cuda --graph --reps 20 --formats q4_0,q8_0,q4_k,q6_k,f16 > $O/gemv.txt 2>&1; echo "gemv rc=$?"
grep -E '^(copy|q|f16)' $O/gemv.txt | awk '{print $1,$2,$3,$4,$5,$6}'
date -u +%FT%TZ
