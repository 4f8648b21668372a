#!/bin/bash
# Session 13 call i (H100): TMA copies of whole K/V tiles in the Hopper prefill attention
# (strided K/V). verify; bench attn --only prefill A/B/A/B against call h's binary
# (flexkern_h: cp.async producer warpgroup); the peers.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s13i; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -12; tail -1 $O/verify.txt
for b in flexkern_h flexkern flexkern_h flexkern; do
  echo "-- $b"; timeout 120 ./$b bench attn --device cuda --only prefill > $O/prefill_$b.txt 2>&1; grep -iE "causal|sliding|softcap|alibi|document|D64" $O/prefill_$b.txt | head -14
done
echo "== peers"; timeout 150 python3 prefill_peers_cuda.py 2>&1 | tail -16
