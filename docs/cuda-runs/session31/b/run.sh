#!/bin/bash
# Session 31 call b: verify --device cuda on main's binary (s31a, HEAD 5df9692's kernels).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/b; mkdir -p $O
date -u +%FT%TZ
timeout 400 ../../../../.devcarry/s31a/flexkern verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.log | cut -c1-200 | head -12
date -u +%FT%TZ
