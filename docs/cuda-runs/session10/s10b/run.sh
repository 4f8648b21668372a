#!/bin/bash
# Session 10 call b: Hopper wgmma prefill kernel (register hand-over fixed).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s10b; mkdir -p $O
echo "== quick prefill (wgmma)"; timeout 45 ./flexkern bench attn --device cuda --quick --only prefill > $O/quick_wg.log 2>&1; rc=$?; echo rc=$rc; tail -8 $O/quick_wg.log
if [ $rc -ne 0 ]; then exit 0; fi
echo "== verify"; timeout 200 ./flexkern verify --device cuda > $O/verify.log 2>&1; echo rc=$?; grep -E " fail|FAIL|verify:" $O/verify.log | head -40; tail -2 $O/verify.log
echo "== prefill wg"; timeout 120 ./flexkern bench attn --device cuda --only prefill > $O/prefill_wg.log 2>&1; echo rc=$?; grep -E "prefill.*: fk_|wg|mma" $O/prefill_wg.log | head -3; tail -17 $O/prefill_wg.log
echo "== prefill mma.sync"; FLEXKERN_CUDA_WGMMA=0 timeout 120 ./flexkern bench attn --device cuda --only prefill > $O/prefill_mma.log 2>&1; echo rc=$?; tail -16 $O/prefill_mma.log | cut -c1-75
echo "== peers"; timeout 200 python3 prefill_peers_cuda.py > $O/prefill_peers.log 2>&1; echo rc=$?; tail -30 $O/prefill_peers.log
