#!/bin/bash
# Session 25 call k (H200), the closing code (74084e0): verify, then the benches (prefill,
# decode attention, GEMV) in the same call.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s25k; mkdir -p $O
date -u +%FT%TZ
timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.txt | cut -c1-160 | head -20
date -u +%FT%TZ
timeout 90 ./flexkern bench attn --device cuda > $O/attn.txt 2>&1; echo "attn rc=$?"
grep -E "^copy|^decode|^prefill|^chunked" $O/attn.txt | cut -c1-110
timeout 90 ./flexkern bench gemv --device cuda --graph --reps 20 > $O/gemv.txt 2>&1; echo "gemv rc=$?"
grep -E "copy|^[a-z0-9_]+ +[0-9]+ +[0-9]+ " $O/gemv.txt | cut -c1-90 | head -16
date -u +%FT%TZ
