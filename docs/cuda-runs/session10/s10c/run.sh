#!/bin/bash
# Session 10 call c: Hopper prefill with Q in shared memory, warpgroup ping-pong, lean softmax.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s10c; mkdir -p $O
echo "== quick prefill"; timeout 45 ./flexkern bench attn --device cuda --quick --only prefill > $O/quick_wg.log 2>&1; rc=$?; echo rc=$rc; tail -4 $O/quick_wg.log | cut -c1-90
if [ $rc -ne 0 ]; then exit 0; fi
echo "== prefill wg"; timeout 120 ./flexkern bench attn --device cuda --only prefill > $O/prefill_wg.log 2>&1; echo rc=$?; grep -E "blocks" $O/prefill_wg.log | cut -c1-160 | head -14; tail -16 $O/prefill_wg.log | cut -c1-80
echo "== verify"; timeout 200 ./flexkern verify --device cuda > $O/verify.log 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.log | head -20; tail -2 $O/verify.log
echo "== peers"; timeout 200 python3 prefill_peers_cuda.py > $O/prefill_peers.log 2>&1; echo rc=$?; grep -E "TFLOP|prefill" $O/prefill_peers.log | head -40
echo "== memcheck prefill"; timeout 120 compute-sanitizer --tool memcheck ./flexkern bench attn --device cuda --quick --only prefill > $O/memcheck_prefill.log 2>&1; echo rc=$?; tail -3 $O/memcheck_prefill.log
