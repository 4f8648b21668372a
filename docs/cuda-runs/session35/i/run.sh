#!/bin/bash
# Session 35 call i: the closing binary (s35g: MLX batches on the staged kernel with the integer
# dot, the pair word indexed by a shift). verify, memcheck quick, bench gemv MLX single rows and
# batches (staged against FLEXKERN_GEMV_STAGED=0, the direct kernel as before), then 8B Q4_0
# decode alternating the plan and the decode attention's early launch of its dependents (s35f,
# FLEXKERN_CUDA_ATTN_EARLY=1), four rounds.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/i; mkdir -p $O
D=../../../../.devcarry
B=$D/s35g/flexkern
S="The three laws of robotics are"
date -u +%FT%TZ
(timeout 150 $B synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/q4_0.gguf > /dev/null 2>&1 &)
timeout 200 $B verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules|bad input" $O/verify.log | cut -c1-200 | head -12
grep -E "mlx.*M[0-9]+ q8" $O/verify.log | grep -v " M1 " | cut -c1-120
date -u +%FT%TZ
timeout 150 compute-sanitizer --tool memcheck $B verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
date -u +%FT%TZ
for r in 1 2; do
  timeout 100 $B bench gemv --device cuda --graph --reps 20 --n 4096,14336 --k 4096 --formats mlx:4:64,mlx:4:32,mlx:8:64,mlx:8:32,mlx:4:128,q4_0,q8_0 >> $O/gemv.log 2>&1
  timeout 100 $B bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats mlx:4:64,mlx:8:64 >> $O/gemv.log 2>&1
  for e in X=1 FLEXKERN_GEMV_STAGED=0; do for m in 4 8; do
    env $e timeout 100 $B bench gemv --device cuda --graph --reps 20 --m $m --n 14336 --k 4096 --formats mlx:4:64,mlx:8:64,mlx:3:64 >> $O/gemv.log 2>&1
    echo "== m$m $e: $(grep -E '^mlx' $O/gemv.log | tail -3 | tr -s ' ' | cut -d' ' -f1-4,6,8 | tr '\n' ';')"
  done; done
done
grep -E "^(copy|mlx|q4_0|q8_0)" $O/gemv.log | head -20 | tr -s ' ' | cut -d' ' -f1-4,6,8
date -u +%FT%TZ
r() { local l=$1; shift; env "$@" timeout 60 $D/s35f/flexkern run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$l rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"; }
for i in 1 2 3 4; do r plan X=1; r early FLEXKERN_CUDA_ATTN_EARLY=1; done
date -u +%FT%TZ
