#!/bin/bash
# Session 13 call j (H100): TMA K/V tiles in the Hopper prefill, with the maps built for the
# final tile (call i's verify hung: maps of 128-key boxes for a kernel that fell back to 64-key
# tiles). verify (TMA=0 too if it fails); bench attn --only prefill A/B against call h's binary;
# the peers.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s13j; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 240 ./flexkern verify --device cuda > $O/verify.txt 2>&1; rc=$?; echo rc=$rc; grep -E " fail|FAIL" $O/verify.txt | head -12; tail -1 $O/verify.txt
if [ $rc != 0 ]; then echo "== verify TMA=0"; FLEXKERN_CUDA_TMA=0 timeout 200 ./flexkern verify --device cuda > $O/verify_notma.txt 2>&1; echo rc=$?; tail -1 $O/verify_notma.txt; exit 0; fi
for b in flexkern_h flexkern; do
  echo "-- $b"; timeout 120 ./$b bench attn --device cuda --only prefill > $O/prefill_$b.txt 2>&1; grep -E "^(prefill|chunked)" $O/prefill_$b.txt | cut -c1-70
done
echo "== peers"; timeout 150 python3 prefill_peers_cuda.py > $O/peers.txt 2>&1; grep -E "matmul|causal  |non-causal " $O/peers.txt | head -12
