#!/bin/bash
# Session 25 call d (H200), the closing prefill code: verify; the prefill bench, the PyTorch
# 2.11 prefill peers (SDPA flash / cuDNN, compiled FlexAttention) on the same shapes, the
# prefill bench again.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s25d; mkdir -p $O
date -u +%FT%TZ
timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.txt | cut -c1-160 | head -20
date -u +%FT%TZ
timeout 90 ./flexkern bench attn --device cuda --only prefill > $O/prefill_1.txt 2>&1; echo "prefill 1 rc=$?"
date -u +%FT%TZ
PYTHONUNBUFFERED=1 timeout 200 python3 prefill_peers_cuda.py > $O/peers.txt 2>&1; echo "prefill peers rc=$?"
date -u +%FT%TZ
timeout 90 ./flexkern bench attn --device cuda --only prefill > $O/prefill_2.txt 2>&1; echo "prefill 2 rc=$?"
date -u +%FT%TZ
for f in prefill_1 prefill_2; do echo "$f: $(grep -E '^(prefill|chunked)' $O/$f.txt | awk '{printf "%.0f|", $(NF-5)/1000}')"; done
grep -E "matmul|flex|sdpa" $O/peers.txt | cut -c1-120
