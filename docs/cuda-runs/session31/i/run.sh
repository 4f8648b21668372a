#!/bin/bash
# Session 31 call i: the closing code with the stage page span put back to one page where pages
# outgrow stages (s31x, the old formula), so verify's new "stages across pages" case must fail.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/i; mkdir -p $O
date -u +%FT%TZ
timeout 200 ../../../../.devcarry/s31x/flexkern verify --device cuda > $O/verify.log 2>&1; echo "verify (old span) rc=$?"
grep -E "FAIL|^verify|decode: " $O/verify.log | cut -c1-200 | head -16
date -u +%FT%TZ
