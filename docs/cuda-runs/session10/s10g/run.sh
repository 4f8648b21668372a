#!/bin/bash
# Session 10 call g: Hopper prefill, how Q K^T reads Q: A/B of FLEXKERN_CUDA_WG_S=0 (smem, n64),
# 1 (smem, n128), 2 (registers), alternated over two rounds; peers; verify.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s10g; mkdir -p $O
date -u +%FT%TZ > $O/date.txt
echo "== smoke"; timeout 45 ./flexkern bench attn --device cuda --quick --only prefill > $O/quick.log 2>&1; rc=$?; echo rc=$rc; if [ $rc -ne 0 ]; then tail -5 $O/quick.log; exit 0; fi
for r in 1 2; do for m in 1 0 2; do
  FLEXKERN_CUDA_WG_S=$m timeout 100 ./flexkern bench attn --device cuda --only prefill > $O/prefill_s${m}_r$r.log 2>&1; echo "mode $m round $r rc=$?"
done; done
for m in 0 1 2; do echo "== mode $m"; paste <(grep -E "^(prefill|chunked)" $O/prefill_s${m}_r1.log | cut -c1-58) <(grep -E "^(prefill|chunked)" $O/prefill_s${m}_r1.log | awk '{print $(NF-5)}') <(grep -E "^(prefill|chunked)" $O/prefill_s${m}_r2.log | awk '{print $(NF-5)}'); done
grep -h "blocks" $O/prefill_s2_r1.log | cut -c1-140 | head -14
echo "== peers"; timeout 100 python3 prefill_peers_cuda.py > $O/prefill_peers.log 2>&1; echo rc=$?; grep -E "TFLOP|prefill" $O/prefill_peers.log | cut -c1-100 | head -24
echo "== verify (mode 1)"; timeout 120 ./flexkern verify --device cuda > $O/verify.log 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.log | head; tail -1 $O/verify.log
echo "== verify --quick (mode 2)"; FLEXKERN_CUDA_WG_S=2 timeout 90 ./flexkern verify --device cuda --quick > $O/verify_s2.log 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify_s2.log | head; tail -1 $O/verify_s2.log
