#!/bin/bash
# Session 34 call j: MLX single rows with their activation row in shared memory (s34j:
# choose::direct_stages_x, FK_DXS, the resident blocks walking row groups grid-stride). verify
# (4 new MLX cases), memcheck, bench gemv MLX at 4 / 8 bits against FLEXKERN_GEMV_DXS=0.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/j; mkdir -p $O
B=../../../../.devcarry/s34j/flexkern
date -u +%FT%TZ
timeout 200 $B verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules|bad input" $O/verify.log | cut -c1-200 | head -12
date -u +%FT%TZ
g() { # label env...
  local l=$1; shift
  env "$@" timeout 100 $B bench gemv --device cuda --graph --reps 20 --n 4096,14336 --k 4096 --formats mlx:4:64,mlx:8:64,mlx:4:32,f16 > $O/gemv_$l.log 2>&1
  echo "== $l ($*)"; grep -E "^(copy|mlx|f16)" $O/gemv_$l.log | tr -s ' ' | cut -d' ' -f1-3,6,8
}
g dxs X=1; g off FLEXKERN_GEMV_DXS=0; g dxs2 X=1
timeout 100 $B bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats mlx:4:64 > $O/gemvk.log 2>&1; grep -E "^mlx" $O/gemvk.log | tr -s ' ' | cut -d' ' -f1-3,6,8
date -u +%FT%TZ
timeout 150 compute-sanitizer --tool memcheck $B verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
date -u +%FT%TZ
