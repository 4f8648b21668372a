#!/bin/bash
# Session 14 call q (H100): the closing binary (comment-only change after call n): verify,
# bench gemv (graph) at the issue's shapes, and the cuBLAS f16 peers in the same call.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s14q; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 240 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -12; tail -2 $O/verify.txt
./flexkern bench gemv --device cuda --graph --reps 20 --formats f16,q8_0,q4_0,q4_k,q6_k --n 14336,4096 --k 4096 > $O/gemv.txt 2>&1
./flexkern bench gemv --device cuda --graph --reps 20 --formats q8_0,q4_0,q4_k,q6_k --n 4096 --k 14336 >> $O/gemv.txt 2>&1
grep -E "^(f16|q8_0|q4_0|q4_k|q6_k|copy)" $O/gemv.txt | awk '{print $1,$2,$3,$4,$5,$6}' | tr '\n' ';'; echo
PYTHONUNBUFFERED=1 timeout 120 python3 gemv_peers_cuda.py --graph > $O/peers.txt 2>&1; tail -9 $O/peers.txt
date -u +%FT%TZ
