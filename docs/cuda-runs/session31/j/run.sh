#!/bin/bash
# Session 31 call j: where a short decode's tiles go, with and without the page window: the
# closing binary (s31h), bench attn --only short with the block timeline and loop phases
# (FLEXKERN_CUDA_TRACE=1), as planned (per-stage page lookups) and with the window on every
# paged decode (FLEXKERN_CUDA_PAGE_WINDOW=0).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/j; mkdir -p $O
F=../../../../.devcarry/s31h/flexkern
date -u +%FT%TZ
for w in default 0; do
  if [ $w = default ]; then E=""; else E="FLEXKERN_CUDA_PAGE_WINDOW=$w"; fi
  env $E FLEXKERN_CUDA_TRACE=1 timeout 60 $F bench attn --device cuda --only short > $O/trace_$w.log 2>&1; echo "== window $w rc=$?"
  grep -E "trace:" $O/trace_$w.log | sed 's/.*phases (us after start): //' | cut -c1-260
done
date -u +%FT%TZ
