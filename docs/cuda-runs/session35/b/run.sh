#!/bin/bash
# Session 35 call b: MLX's device layout (4-bit codes in Q4_0's nibble order, each group's
# scale and bias in one word). verify and memcheck on s35c (the layout, sums converted with
# two adds), bench gemv alternating s35a (call a: the file's layout, byte permutes), s35b (the
# layout, I2F) and s35c.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/b; mkdir -p $O
D=../../../../.devcarry
date -u +%FT%TZ
timeout 200 $D/s35c/flexkern verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules|bad input" $O/verify.log | cut -c1-200 | head -12
grep -cE "mlx.*q8.*pass" $O/verify.log
date -u +%FT%TZ
for r in 1 2; do for v in s35a s35b s35c; do
  timeout 100 $D/$v/flexkern bench gemv --device cuda --graph --reps 20 --n 4096,14336 --k 4096 --formats mlx:4:64,mlx:8:64,mlx:4:32,mlx:8:32:bf16,q4_0,q8_0 > $O/gemv_${v}_$r.log 2>&1
  echo "== $v round $r"; grep -E "^(copy|mlx|q4_0|q8_0)" $O/gemv_${v}_$r.log | tr -s ' ' | cut -d' ' -f1-3,6
  timeout 100 $D/$v/flexkern bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats mlx:4:64,mlx:8:64 > $O/gemvk_${v}_$r.log 2>&1; grep -E "^mlx" $O/gemvk_${v}_$r.log | tr -s ' ' | cut -d' ' -f1-3,6
done; done
date -u +%FT%TZ
timeout 150 compute-sanitizer --tool memcheck $D/s35c/flexkern verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
date -u +%FT%TZ
