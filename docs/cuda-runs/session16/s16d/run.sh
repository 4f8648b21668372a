#!/bin/bash
# Session 16 call d (H100): Q6_K back to 32-weight units unrolled (planar layout kept), the
# normalizing GEMV for mixed-format Q/K/V (Q and K stacked, V alone) and for the output head.
# A/B decode against the session-15 binary (8B Q4_K_M, Q4_0, Q8_0; SmolLM2 Q4_K_M), ncu of one
# 8B Q4_K_M step, bench gemv, verify, verify-model on SmolLM2 Q4_K_M and Q4_0.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s16d; mkdir -p $O
date -u +%FT%TZ
./flexkern bench gemv --device cuda --graph --reps 20 --formats q6_k,q4_k,q4_0,q8_0,f16 --n 14336,4096,49152 --k 4096 > $O/gemv.txt 2>&1
./flexkern bench gemv --device cuda --graph --reps 20 --formats q6_k,q4_k,q4_0,q8_0 --n 4096 --k 14336 >> $O/gemv.txt 2>&1
grep -E "^(f16|q8_0|q4_0|q4_k|q6_k|copy)" $O/gemv.txt | awk '{print $1,$2,$3,$4,$6}' | tr '\n' ';'; echo
S="The three laws of robotics are"
for sf in "llama3-8b q4_k_m" "llama3-8b q4_0" "llama3-8b q8_0" "smollm2-135m q4_k_m"; do
  set -- $sf
  timeout 200 ./flexkern synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  for b in old new; do bin=./flexkern; [ $b = old ] && bin=./flexkern_old; timeout 60 $bin run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1; done
  for r in 1 2; do
    for b in old new; do
      bin=./flexkern; [ $b = old ] && bin=./flexkern_old
      timeout 60 $bin run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >$O/text_$b.txt
      echo "$1 $2 $b $(grep -h -o 'decode:.*' $O/r.txt | tail -1 | cut -c1-40)"
    done
  done
  cmp -s $O/text_old.txt $O/text_new.txt && echo "$2: same greedy text old/new" || echo "$2: greedy text differs old/new"
  if [ "$sf" = "llama3-8b q4_k_m" ]; then
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    FLEXKERN_CUDA_GRAPH=0 timeout 200 $NCU --csv --metrics gpu__time_duration.sum --cache-control none --clock-control none ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 3 --temperature 0 --ctx 160 > $O/ncu.csv 2>$O/ncu_err.txt; echo "ncu rc=$?"
    python3 decode_kernels.py $O/ncu.csv 32 > $O/step.txt 2>&1; head -24 $O/step.txt; gzip -f $O/ncu.csv
  fi
  rm -f /tmp/b.gguf
done
date -u +%FT%TZ
echo "== verify"; timeout 240 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -8; tail -2 $O/verify.txt
for f in q4_k_m q4_0; do
  timeout 30 ./flexkern synth-model --shape smollm2-135m --format $f --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
  for p in precise default; do timeout 60 ./flexkern verify-model --device cuda --gpu-path $p --model /tmp/s.gguf --tokens 64 > $O/vm.txt 2>&1; echo "verify-model $f $p rc=$?: $(tail -1 $O/vm.txt)"; done
done
rm -f $O/r.txt $O/text_*.txt $O/vm.txt
date -u +%FT%TZ
