#!/bin/bash
# Session 10 call k (H100): the closing binary after the review: verify, prefill bench, memcheck of verify --quick.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s10k; mkdir -p $O
date -u +%FT%TZ > $O/date.txt; nvidia-smi --query-gpu=name,driver_version --format=csv >> $O/date.txt; cat $O/date.txt
echo "== verify"; timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head; tail -2 $O/verify.txt
echo "== prefill"; timeout 90 ./flexkern bench attn --device cuda --only prefill > $O/prefill.txt 2>&1; echo rc=$?; grep -E "^(prefill|chunked)" $O/prefill.txt | cut -c1-72
echo "== memcheck verify --quick"; timeout 150 compute-sanitizer --tool memcheck ./flexkern verify --device cuda --quick > $O/memcheck.txt 2>&1; echo rc=$?; tail -3 $O/memcheck.txt
