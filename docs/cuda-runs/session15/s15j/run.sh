#!/bin/bash
# Session 15 call j (H100): the closing commit (the hooks' static CUDA moved to kernels/hooks.cuh;
# generated sources differ from call i's in comments only): verify, bench prefill, the peers.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s15j; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 300 ./flexkern verify --device cuda > $O/verify.txt 2>&1; rc=$?; echo rc=$rc; grep -E " fail|FAIL" $O/verify.txt | head -8; tail -2 $O/verify.txt
row() { grep -E "^(prefill|chunked)" $1 | awk '{n=NF; printf "%.0f|", $(n-5)/1000}'; echo; }
timeout 150 ./flexkern bench attn --device cuda --only prefill > $O/prefill.txt 2>&1; echo "-- final: $(row $O/prefill.txt)"
echo "== peers"; timeout 200 python3 prefill_peers_cuda.py > $O/peers.txt 2>&1; grep -E "matmul|flex " $O/peers.txt | awk '{print $(NF-1)}' | tr '\n' '|'; echo
date -u +%FT%TZ
