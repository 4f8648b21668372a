#!/bin/bash
# Session 22 call h (H200), the final code e6f29ba: verify, verify-model, SmolLM2 and 8B Q4_0
# decode, and the Q4_0 GEMVs beside the register batches.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s22h; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "^verify:|modules" $O/verify.txt | tail -2; grep -iE " fail" $O/verify.txt | head -5 | cut -c1-200
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
timeout 120 ./flexkern verify-model --device cuda --model /tmp/s.gguf > $O/verify_model.txt 2>&1; echo "verify-model rc=$?"; tail -1 $O/verify_model.txt | cut -c1-200
timeout 90 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
L=$O/runs.txt
for r in 1 2; do for m in b s; do for c in "X=0" "FLEXKERN_GEMV_BULK=0"; do
  env $c timeout 40 ./flexkern run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > /dev/null 2>> $L; echo "$m rc=$? [$c] $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1)"
done; done; done
for c in "X=0" "FLEXKERN_GEMV_BULK=0"; do env $c timeout 60 ./flexkern bench gemv --device cuda --graph --reps 20 --formats q4_0 --n 14336,4096 --k 4096 >> $O/gemv.txt 2>&1; done
grep -E "^q4_0" $O/gemv.txt | awk '{printf "  %s %s %s %s %s\n", $1,$2,$3,$6,$NF}'
date -u +%FT%TZ
