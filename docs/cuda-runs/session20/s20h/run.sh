#!/bin/bash
# Session 20 call h: verify on the final code (35a0c1a; after call g only host code changed:
# the verify helpers, FkRopeKv's Rust home).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s20h; mkdir -p $O
date -u +%FT%TZ
timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "^verify:|modules" $O/verify.txt | tail -2; grep -E "norm_qkv_rope|rope_kv_write Normal f16" $O/verify.txt | cut -c1-140
date -u +%FT%TZ
