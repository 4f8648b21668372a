#!/bin/bash
# Session 30 call m: the decode attention at a model step's short contexts (bench attn --only
# short: B1 x 64 / 160 keys, the 8B heads and SmolLM2's, paged 16), timed, then with the block
# timeline and phase marks (FLEXKERN_CUDA_TRACE=1).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/m; mkdir -p $O
F=../../../../.devcarry/s30m/flexkern
date -u +%FT%TZ
timeout 100 $F bench attn --device cuda --only short > $O/short.log 2>&1; echo "bench rc=$?"
grep -E "^  decode" $O/short.log | cut -c1-330
FLEXKERN_CUDA_TRACE=1 timeout 100 $F bench attn --device cuda --only short > $O/short_trace.log 2>&1; echo "trace rc=$?"
grep -vE "^\s*$" $O/short_trace.log | grep -vE "^(case|flexkern|copy)" | cut -c1-400 | head -30
date -u +%FT%TZ
