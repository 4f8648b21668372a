#!/bin/bash
# Session 35 call g: the streamed GEMV with a block's rows dealt to its warps in turn
# (FLEXKERN_GEMV_INTERLEAVE=1, FK_SINTL), with 32 warps an SM (FLEXKERN_GEMV_FIT=4) and without
# the bulk ring, against the plan (s35e). Call e's read ceiling: rows a block at 32 warps an SM
# read 86.9 % against 81.6 % for rows a warp at 16.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/g; mkdir -p $O
B=../../../../.devcarry/s35e/flexkern
date -u +%FT%TZ
g() { # label env...
  local l=$1; shift
  env "$@" timeout 100 $B bench gemv --device cuda --graph --reps 20 --n 4096,14336 --k 4096 --formats q4_0,q4_k,mlx:4:64 >> $O/gemv.log 2>&1
  env "$@" timeout 100 $B bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats q4_0,q4_k >> $O/gemv.log 2>&1
  echo "== $l ($*)"; grep -E "^(q4_0|q4_k|mlx)" $O/gemv.log | tail -8 | tr -s ' ' | cut -d' ' -f1-3,6,8 | tr '\n' ';' ; echo
}
for r in 1 2; do
g plan X=1
g il FLEXKERN_GEMV_INTERLEAVE=1
g fit4 FLEXKERN_GEMV_FIT=4
g il_fit4 FLEXKERN_GEMV_INTERLEAVE=1 FLEXKERN_GEMV_FIT=4
g il_fit4_reg FLEXKERN_GEMV_INTERLEAVE=1 FLEXKERN_GEMV_FIT=4 FLEXKERN_GEMV_BULK=0
g fit4_reg FLEXKERN_GEMV_FIT=4 FLEXKERN_GEMV_BULK=0
g il_fit3 FLEXKERN_GEMV_INTERLEAVE=1 FLEXKERN_GEMV_FIT=3
done
q() { local l=$1; shift; env "$@" timeout 100 $B bench gemv --device cuda --graph --reps 20 --n 4096,14336 --k 4096 --formats q8_0 > $O/q8_$l.log 2>&1; echo "== q8 $l ($*)"; grep -E "^q8_0" $O/q8_$l.log | tr -s ' ' | cut -d' ' -f1-3,6,8 | tr '\n' ';'; echo; }
q plan X=1; q il FLEXKERN_GEMV_INTERLEAVE=1; q il_fit4_sun2 FLEXKERN_GEMV_INTERLEAVE=1 FLEXKERN_GEMV_FIT=4 FLEXKERN_GEMV_SUN=2; q fit4_sun2 FLEXKERN_GEMV_FIT=4 FLEXKERN_GEMV_SUN=2
date -u +%FT%TZ
