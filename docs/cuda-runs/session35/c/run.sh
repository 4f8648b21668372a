#!/bin/bash
# Session 35 call c: where the side entries lie (bench/micro/side_stream.cu, a study outside
# flexkern), and MLX's pair word indexed by a shift (s35d) against a signed division (s35c).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/c; mkdir -p $O
D=../../../../.devcarry
date -u +%FT%TZ
nvcc -O3 -std=c++17 -arch=sm_90a -o $O/ss ../../../../bench/micro/side_stream.cu && $O/ss > $O/side_stream.log 2>&1; echo "ss rc=$?"; cat $O/side_stream.log; rm -f $O/ss
date -u +%FT%TZ
for r in 1 2; do for v in s35c s35d; do
  timeout 100 $D/$v/flexkern bench gemv --device cuda --graph --reps 20 --n 4096,14336 --k 4096 --formats mlx:4:64,mlx:4:32,mlx:8:64,mlx:8:32,mlx:4:128 > $O/gemv_${v}_$r.log 2>&1
  echo "== $v round $r"; grep -E "^(copy|mlx)" $O/gemv_${v}_$r.log | tr -s ' ' | cut -d' ' -f1-3,6
done; done
date -u +%FT%TZ
