#!/bin/bash
# Session 29 call l, the final HEAD (the trace's phase macros shared by both tensor-core kernels;
# production cubins byte-identical to call k's, NVRTC here): verify; the B1 x 128k trace.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/l; mkdir -p $O
F=../../../../.devcarry/s29l/flexkern
date -u +%FT%TZ
timeout 200 $F verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.log | cut -c1-200 | head -12
FLEXKERN_CUDA_TRACE=1 timeout 60 $F bench attn --device cuda --only L131072 > $O/trace.log 2>&1; echo "trace rc=$?"
grep -E "trace:|^decode" $O/trace.log | sed 's/switch gaps[^|]*|//' | cut -c1-330
date -u +%FT%TZ
