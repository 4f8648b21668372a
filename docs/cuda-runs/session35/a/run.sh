#!/bin/bash
# Session 35 call a: MLX 4 / 8 bits on the streamed kernel against Q8_0 activations (s35a:
# FkMlx::dot_raw, StreamActs::for_format). verify (MLX integer-dot cases), memcheck quick, bench
# gemv MLX default (streamed) against FLEXKERN_GEMV_STREAM=0 (the direct kernel, as before).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/a; mkdir -p $O
B=../../../../.devcarry/s35a/flexkern
date -u +%FT%TZ
timeout 200 $B verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules|bad input" $O/verify.log | cut -c1-200 | head -12
grep -E "mlx.*q8" $O/verify.log | head -40 | cut -c1-160
date -u +%FT%TZ
g() { # label env...
  local l=$1; shift
  env "$@" timeout 100 $B bench gemv --device cuda --graph --reps 20 --n 4096,14336 --k 4096 --formats mlx:4:64,mlx:8:64,mlx:4:32,q4_0,q8_0 > $O/gemv_$l.log 2>&1
  echo "== $l ($*)"; grep -E "^(copy|mlx|q4_0|q8_0)" $O/gemv_$l.log | tr -s ' ' | cut -d' ' -f1-3,6,8
}
g new X=1; g old FLEXKERN_GEMV_STREAM=0; g new2 X=1; g old2 FLEXKERN_GEMV_STREAM=0
for l in new old; do
  e=X=1; [ $l = old ] && e=FLEXKERN_GEMV_STREAM=0
  env $e timeout 100 $B bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats mlx:4:64,mlx:8:64 > $O/gemvk_$l.log 2>&1; echo "== k14336 $l"; grep -E "^mlx" $O/gemvk_$l.log | tr -s ' ' | cut -d' ' -f1-3,6,8
done
date -u +%FT%TZ
timeout 150 compute-sanitizer --tool memcheck $B verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
date -u +%FT%TZ
