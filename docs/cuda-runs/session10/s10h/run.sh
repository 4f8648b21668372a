#!/bin/bash
# Session 10 call h (H100): the final binary: verify, prefill with peers, GEMV dp4a-at-M=1 A/B, memcheck.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s10h; mkdir -p $O
date -u +%FT%TZ > $O/date.txt; nvidia-smi --query-gpu=name,driver_version --format=csv >> $O/date.txt; cat $O/date.txt
echo "== smoke"; timeout 45 ./flexkern bench attn --device cuda --quick --only prefill > $O/quick.log 2>&1; rc=$?; echo rc=$rc; if [ $rc -ne 0 ]; then tail -5 $O/quick.log; exit 0; fi
echo "== verify"; timeout 150 ./flexkern verify --device cuda > $O/verify.log 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.log | head; tail -2 $O/verify.log
echo "== prefill 1"; timeout 90 ./flexkern bench attn --device cuda --only prefill > $O/prefill1.log 2>&1; echo rc=$?
echo "== peers"; timeout 100 python3 prefill_peers_cuda.py > $O/prefill_peers.log 2>&1; echo rc=$?; grep -E "TFLOP|prefill" $O/prefill_peers.log | cut -c1-100 | head -24
echo "== prefill 2"; timeout 90 ./flexkern bench attn --device cuda --only prefill > $O/prefill2.log 2>&1; echo rc=$?
paste <(grep -E "^(prefill|chunked)" $O/prefill1.log | cut -c1-58) <(grep -E "^(prefill|chunked)" $O/prefill1.log | awk '{print $(NF-5)}') <(grep -E "^(prefill|chunked)" $O/prefill2.log | awk '{print $(NF-5)}')
grep -h "blocks" $O/prefill1.log | cut -c1-120 | head -14
for r in 1 2; do for d in 0 1; do
  if [ $d = 1 ]; then export FLEXKERN_GEMV_DP4A=1; else unset FLEXKERN_GEMV_DP4A; fi
  timeout 60 ./flexkern bench gemv --device cuda --formats q4_0,q8_0 --n 14336,4096 > $O/gemv_dp4a${d}_r$r.log 2>&1; echo "gemv dp4a=$d round $r rc=$?"; grep -iE "q4_0|q8_0" $O/gemv_dp4a${d}_r$r.log | cut -c1-120 | head -4
done; done; unset FLEXKERN_GEMV_DP4A
echo "== memcheck verify --quick"; timeout 150 compute-sanitizer --tool memcheck ./flexkern verify --device cuda --quick > $O/memcheck.log 2>&1; echo rc=$?; tail -3 $O/memcheck.log
