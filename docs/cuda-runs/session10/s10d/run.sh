#!/bin/bash
# Session 10 call d: intra-warpgroup overlap; full decode + prefill bench with peers, verify, memcheck.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s10d; mkdir -p $O
date -u +%FT%TZ > $O/date.txt; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> $O/date.txt
echo "== quick prefill"; timeout 45 ./flexkern bench attn --device cuda --quick --only prefill > $O/quick_wg.log 2>&1; rc=$?; echo rc=$rc
if [ $rc -ne 0 ]; then tail -5 $O/quick_wg.log; exit 0; fi
echo "== verify"; timeout 150 ./flexkern verify --device cuda > $O/verify.log 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.log | head -20; tail -2 $O/verify.log
echo "== bench attn (decode + prefill)"; timeout 150 ./flexkern bench attn --device cuda > $O/bench_attn.log 2>&1; echo rc=$?; grep -E "^copy|% of copy" $O/bench_attn.log | cut -c1-60,150-260 | head -12; tail -32 $O/bench_attn.log | cut -c1-82
echo "== prefill peers"; timeout 110 python3 prefill_peers_cuda.py > $O/prefill_peers.log 2>&1; echo rc=$?; grep -E "TFLOP|prefill" $O/prefill_peers.log | head -40
echo "== decode peers"; timeout 80 python3 attention_peers_cuda.py > $O/decode_peers.log 2>&1; echo rc=$?; tail -14 $O/decode_peers.log
echo "== memcheck verify --quick"; timeout 120 compute-sanitizer --tool memcheck ./flexkern verify --device cuda --quick > $O/memcheck.log 2>&1; echo rc=$?; tail -3 $O/memcheck.log
