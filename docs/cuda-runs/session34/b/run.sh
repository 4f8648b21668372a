#!/bin/bash
# Session 34 call b: more warps an SM for the streamed GEMV (call a: one block an SM lost 5 points, so a
# warp's instruction latency may set the pace). Knobs only on HEAD's binary (s33g): blocks an SM
# planned (FIT 3, 4: fewer registers), sixteen-warp blocks, four-warp blocks, units a batch.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/b; mkdir -p $O
B=../../../../.devcarry/s33g/flexkern
date -u +%FT%TZ
g() { # label formats env...
  local l=$1 f=$2; shift 2
  env "$@" timeout 100 $B bench gemv --device cuda --graph --reps 20 --n 14336,4096 --k 4096 --formats $f > $O/gemv_$l.log 2>&1
  echo "== $l ($*) rc=$?"; grep -E "^(copy|q8_0|q4_0|q4_k|q6_k) " $O/gemv_$l.log | tr -s ' ' | cut -c1-100
}
F=q4_0,q4_k,q8_0,q6_k
g def1 $F X=1
g fit3 $F FLEXKERN_GEMV_FIT=3
g fit4 $F FLEXKERN_GEMV_FIT=4
g fit3s2 $F FLEXKERN_GEMV_FIT=3 FLEXKERN_GEMV_SUN=2
g fit4s2 $F FLEXKERN_GEMV_FIT=4 FLEXKERN_GEMV_SUN=2
g w16 $F FLEXKERN_GEMV_WARPS=16
g w4f4 $F FLEXKERN_GEMV_WARPS=4 FLEXKERN_GEMV_FIT=4
g s2 $F FLEXKERN_GEMV_SUN=2
g s3 $F FLEXKERN_GEMV_SUN=3
g def2 $F X=1
date -u +%FT%TZ
