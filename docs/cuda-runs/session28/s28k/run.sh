#!/bin/bash
# Session 28 call k, the closing code (bench's device tools moved to bench/device.rs, timing
# through one loop; kernels as call h's): verify; bench attn --only decode.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s28k; mkdir -p $O
date -u +%FT%TZ
timeout 150 ./flexkern verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.log | cut -c1-200 | head -12
timeout 60 ./flexkern bench attn --device cuda --only decode > $O/attn.log 2>&1; echo "bench rc=$?"
grep -E "^copy|^decode" $O/attn.log | cut -c1-150
grep -o 'queued behind GPU work [0-9.]* ms, [0-9.]* % of copy, [0-9.]* % of read' $O/attn.log
date -u +%FT%TZ
