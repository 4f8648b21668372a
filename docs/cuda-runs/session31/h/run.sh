#!/bin/bash
# Session 31 call h: the closing binary (s31h: call g's, plus a stage's page span of two where
# pages outgrow stages, and verify's new paged decode cases under 2-byte queries). verify
# --device cuda as planned and with the page window on every paged decode
# (FLEXKERN_CUDA_PAGE_WINDOW=0); memcheck on verify --quick with it on. Page-16 decode kernels are
# SASS-identical to call g's (NVRTC here), so no bench.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/h; mkdir -p $O
NEW=../../../../.devcarry/s31h/flexkern
date -u +%FT%TZ
timeout 230 $NEW verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules|decode: " $O/verify.log | cut -c1-200 | head -16
date -u +%FT%TZ
FLEXKERN_CUDA_PAGE_WINDOW=0 timeout 200 $NEW verify --device cuda > $O/verify_window.log 2>&1; echo "verify (window on every paged decode) rc=$?"
grep -E "FAIL|^verify|modules|decode: " $O/verify_window.log | cut -c1-200 | head -16
date -u +%FT%TZ
FLEXKERN_CUDA_PAGE_WINDOW=0 timeout 150 compute-sanitizer --tool memcheck $NEW verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck (window on) rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
date -u +%FT%TZ
