#!/bin/bash
# Session 10 call i (H100): P V (and Q-in-register Q K^T) in n128 wgmma against n64 (flexkern_before:
# commit 2de3b92), alternated over two rounds; peers; verify and memcheck of the new binary.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s10i; mkdir -p $O
date -u +%FT%TZ > $O/date.txt; nvidia-smi --query-gpu=name,driver_version --format=csv >> $O/date.txt; cat $O/date.txt
echo "== smoke"; timeout 45 ./flexkern bench attn --device cuda --quick --only prefill > $O/quick.log 2>&1; rc=$?; echo rc=$rc; if [ $rc -ne 0 ]; then tail -5 $O/quick.log; exit 0; fi
timeout 60 ./flexkern_before bench attn --device cuda --quick --only prefill > $O/quick_before.log 2>&1
for r in 1 2; do for b in flexkern_before flexkern; do
  timeout 90 ./$b bench attn --device cuda --only prefill > $O/prefill_${b}_r$r.log 2>&1; echo "$b round $r rc=$?"
done; done
col() { grep -E "^(prefill|chunked)" $1 | awk '{print $(NF-5)}'; }
echo "case | before r1 | after r1 | before r2 | after r2"
paste <(grep -E "^(prefill|chunked)" $O/prefill_flexkern_r1.log | cut -c1-56) <(col $O/prefill_flexkern_before_r1.log) <(col $O/prefill_flexkern_r1.log) <(col $O/prefill_flexkern_before_r2.log) <(col $O/prefill_flexkern_r2.log)
echo "== peers"; timeout 100 python3 prefill_peers_cuda.py > $O/peers.txt 2>&1; echo rc=$?; grep -E "TFLOP|prefill" $O/peers.txt | cut -c1-100 | head -24
echo "== verify"; timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head; tail -2 $O/verify.txt
echo "== memcheck verify --quick"; timeout 150 compute-sanitizer --tool memcheck ./flexkern verify --device cuda --quick > $O/memcheck.txt 2>&1; echo rc=$?; tail -3 $O/memcheck.txt
rm -f $O/quick.log $O/quick_before.log
