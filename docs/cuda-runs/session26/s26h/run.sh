#!/bin/bash
# Session 26 call h: Q4_K launches of 8192+ rows and 24+ MiB on the bulk ring. verify; bench
# gemv --graph against session 25's closing binary (flexkern_old), alternating; 8B Q4_K_M
# decode alternating, with the step trace once each.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s26h; mkdir -p $O
date -u +%FT%TZ
(timeout 150 ./flexkern synth-model --shape llama3-8b --format q4_k_m --tokenizer bytes --vocab 49152 --out /tmp/q4_k_m.gguf > /dev/null 2>&1; echo "synth rc=$?" > $O/synth.txt) &
timeout 300 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.txt | cut -c1-200 | head -20
date -u +%FT%TZ
for r in 1 2; do for b in flexkern flexkern_old; do
  timeout 60 ./$b bench gemv --device cuda --graph --reps 20 --n 4096,14336,28672 --k 4096 --formats q4_k,q4_0 > $O/g.txt 2>&1
  echo "$b: $(grep -E '^ *(q4_k|q4_0) ' $O/g.txt | awk '{printf "%s %s %s %s | ", $1, $2, $4, $6}')"
done; done
wait; cat $O/synth.txt
S="The three laws of robotics are"
for r in 1 2 3; do for b in flexkern flexkern_old; do
  timeout 40 ./$b run --device cuda --model /tmp/q4_k_m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $O/runs.txt; echo "$b rc=$? $(tail -c 300 $O/runs.txt | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done
for b in flexkern flexkern_old; do
  FLEXKERN_CUDA_TRACE=step timeout 40 ./$b run --device cuda --model /tmp/q4_k_m.gguf --prompt "$S" -n 40 --temperature 0 --ctx 160 > /dev/null 2> $O/trace_$b.txt
  echo "== $b trace"; grep -E "fk_gemv|fk_attn|step trace: [0-9]" $O/trace_$b.txt | cut -c1-150 | head -12
done
date -u +%FT%TZ
