#!/bin/bash
# Session 34 call i: does the direct kernel's two-unit step help its other single-row formats?
# bench gemv MLX (4 and 8 bits, groups of 64 and 32) and F32 with FLEXKERN_GEMV_DUNROLL=1 / 2,
# alternating, on the closing binary (s34f).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/i; mkdir -p $O
B=../../../../.devcarry/s34f/flexkern
date -u +%FT%TZ
g() { # label env...
  local l=$1; shift
  env "$@" timeout 100 $B bench gemv --device cuda --graph --reps 20 --n 4096,14336 --k 4096 --formats mlx:4:64,mlx:8:64,mlx:4:32,f32 > $O/gemv_$l.log 2>&1
  echo "== $l ($*)"; grep -E "^(mlx|f32)" $O/gemv_$l.log | tr -s ' ' | cut -d' ' -f1-3,6,8
}
g u1 FLEXKERN_GEMV_DUNROLL=1; g u2 FLEXKERN_GEMV_DUNROLL=2; g u1b FLEXKERN_GEMV_DUNROLL=1; g u2b FLEXKERN_GEMV_DUNROLL=2
date -u +%FT%TZ
