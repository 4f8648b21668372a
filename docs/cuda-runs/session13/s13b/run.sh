#!/bin/bash
# Session 13 call b (H100): the prompt GEMM on wgmma (from 64 rows). verify; bench gemv M 512
# wgmma n128 / n256 / mma.sync; 8B Q4_0 prompt 512 tokens.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s13b; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -12; grep -c "tensor cores" $O/verify.txt; tail -1 $O/verify.txt
echo "== bench gemv M 512: wgmma n128, n256, mma.sync"
for v in "" "FLEXKERN_GEMM_BN=256" "FLEXKERN_GEMM_WGMMA=0"; do
  echo "-- $v"
  env $v timeout 60 ./flexkern bench gemv --device cuda --m 512 --formats f16,q8_0,q4_0,q4_k --reps 10 2>&1 | grep -E "^(f16|q8_0|q4_0|q4_k) "
  env $v timeout 60 ./flexkern bench gemv --device cuda --m 512 --formats f16,q4_0 --n 4096 --k 14336 --reps 10 2>&1 | grep -E "^(f16|q4_0) "
done
echo "== M 64 / 128 (wgmma)"
for m in 64 128 256; do timeout 30 ./flexkern bench gemv --device cuda --m $m --formats f16,q4_0 --n 14336 --reps 10 2>&1 | grep -E "^(f16|q4_0) " | sed "s/^/m $m /"; done
echo "== 8B Q4_0 prompt 512"
P=$(python3 -c "print(('The three laws of robotics are a set of rules devised by the science fiction author Isaac Asimov. ' * 8)[:511])")
timeout 120 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$P" -n 4 --temperature 0 --ctx 600 >/dev/null 2>&1
for v in "" "FLEXKERN_GEMM_BN=256" "" "FLEXKERN_GEMM_BN=256"; do env $v timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$P" -n 16 --temperature 0 --ctx 600 2>$O/r.txt >/dev/null; echo "8b q4_0 [$v] $(grep -h -o 'prefill.*' $O/r.txt | tail -1 | cut -c1-90)"; done
FLEXKERN_CUDA_PROFILE=1 FLEXKERN_CUDA_GRAPH=0 timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$P" -n 2 --temperature 0 --ctx 600 2>$O/prof.txt >/dev/null; tail -25 $O/prof.txt
