#!/bin/bash
# Session 35 call l: HEAD's release build (s35l, b356dc3 + docs): verify, then the GEMV bench and
# cuBLAS (bench/gemv_peers_cuda.py) in the same call.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/l; mkdir -p $O
B=../../../../.devcarry/s35l/flexkern
date -u +%FT%TZ
timeout 200 $B verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules|bad input" $O/verify.log | cut -c1-200 | head -8
date -u +%FT%TZ
timeout 100 $B bench gemv --device cuda --graph --reps 20 --n 4096,14336 --k 4096 --formats mlx:4:64,mlx:8:64,mlx:4:32,mlx:8:32,q4_0,q8_0,q4_k,q6_k,f16 > $O/gemv.log 2>&1
grep -E "^(copy|mlx|q4|q6|q8|f16)" $O/gemv.log | tr -s ' ' | cut -d' ' -f1-3,5,6
PYTHONUNBUFFERED=1 timeout 120 python3 ../../../../bench/gemv_peers_cuda.py --graph > $O/gemv_peers.log 2>&1; echo "peers rc=$?"; tail -8 $O/gemv_peers.log
date -u +%FT%TZ
