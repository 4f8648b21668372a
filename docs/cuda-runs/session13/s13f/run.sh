#!/bin/bash
# Session 13 call f (H100): the Hopper GEMM with TMA copies (one producer thread, mbarriers)
# against call c's binary (flexkern_c). verify; bench gemv M 512 A/B/A (n128, n256); 8B F16
# prompt 512.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s13f; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -12; tail -1 $O/verify.txt
echo "== bench gemv M 512"
for v in "./flexkern_c" "./flexkern" "env FLEXKERN_GEMM_BN=256 ./flexkern" "./flexkern_c" "./flexkern" "env FLEXKERN_GEMM_BN=256 ./flexkern"; do
  echo "-- $v"
  timeout 60 $v bench gemv --device cuda --m 512 --formats f16,q4_0 --reps 10 2>&1 | grep -E "^(f16|q4_0) " | cut -c1-75
  timeout 60 $v bench gemv --device cuda --m 512 --formats f16 --n 4096 --k 14336 --reps 10 2>&1 | grep -E "^(f16|q4_0) " | cut -c1-75
done
P=$(python3 -c "print(('The three laws of robotics are a set of rules devised by the science fiction author Isaac Asimov. ' * 8)[:511])")
for f in f16; do
  timeout 150 ./flexkern synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$P" -n 4 --temperature 0 --ctx 600 >/dev/null 2>&1
  for b in "./flexkern_c" "./flexkern" "env FLEXKERN_GEMM_BN=256 ./flexkern" "./flexkern_c" "./flexkern" "env FLEXKERN_GEMM_BN=256 ./flexkern"; do timeout 60 $b run --device cuda --model /tmp/b.gguf --prompt "$P" -n 32 --temperature 0 --ctx 600 2>$O/r.txt >/dev/null; echo "8b $f [$b] $(grep -h -o 'prefill.*' $O/r.txt | tail -1 | cut -c1-90)"; done
  rm -f /tmp/b.gguf
done
