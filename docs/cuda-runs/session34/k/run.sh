#!/bin/bash
# Session 34 call k: the closing binary (s34k: s34j with the direct kernel's unit step in one
# helper, fk_dunit; the single-row cubins are byte-identical in SASS, batched ones reordered).
# verify and memcheck.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/k; mkdir -p $O
B=../../../../.devcarry/s34k/flexkern
date -u +%FT%TZ
timeout 150 $B verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules|bad input" $O/verify.log | cut -c1-200 | head -12
date -u +%FT%TZ
timeout 80 compute-sanitizer --tool memcheck $B verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
date -u +%FT%TZ
