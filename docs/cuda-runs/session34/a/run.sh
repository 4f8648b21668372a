#!/bin/bash
# Session 34 call a: can each GEMV launch's blocks sit beside the previous launch's, one an SM,
# with their whole bulk ring issued before the PDL wait? Knobs only on HEAD's binary (s33g):
# FLEXKERN_GEMV_GRID=1 (one block an SM where two fit) with rings of 2-5 stages, against the
# default plan; Q8_0 on the bulk ring. bench gemv --graph, 14336 and 4096 x 4096.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/a; mkdir -p $O
B=../../../../.devcarry/s33g/flexkern
date -u +%FT%TZ
g() { # label formats env...
  local l=$1 f=$2; shift 2
  env "$@" timeout 100 $B bench gemv --device cuda --graph --reps 20 --n 14336,4096 --k 4096 --formats $f > $O/gemv_$l.log 2>&1
  echo "== $l ($*) rc=$?"; grep -E "^(copy|q8_0|q4_0|q4_k|q6_k) " $O/gemv_$l.log | tr -s ' ' | cut -c1-100
}
F=q4_0,q4_k,q8_0,q6_k
g def1 $F X=1
g grid1 $F FLEXKERN_GEMV_GRID=1
g grid1b3 q4_0,q4_k,q8_0 FLEXKERN_GEMV_GRID=1 FLEXKERN_GEMV_BULK=3
g grid1b4 q4_0,q4_k,q8_0 FLEXKERN_GEMV_GRID=1 FLEXKERN_GEMV_BULK=4
g grid1b5 q4_0,q4_k,q8_0 FLEXKERN_GEMV_GRID=1 FLEXKERN_GEMV_BULK=5
g b2 q8_0 FLEXKERN_GEMV_BULK=2
g b2c2 q8_0 FLEXKERN_GEMV_BULK=2 FLEXKERN_GEMV_CLUSTER=2
g def2 $F X=1
g grid1b4r q4_0,q4_k,q8_0 FLEXKERN_GEMV_GRID=1 FLEXKERN_GEMV_BULK=4
date -u +%FT%TZ
