#!/bin/bash
# Session 22 call c (H200): the GEMV's bulk-copy ring (FK_SBULK) for Q4_0 / Q8_0 / Q4_K.
# verify; bench gemv with the ring (default), FLEXKERN_GEMV_BULK=0 / 3 / 2, alternating;
# 8B Q4_0 and SmolLM2 decode, ring against registers and the old binary; step timeline.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s22c; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "^verify:|modules" $O/verify.txt | tail -2; grep -iE " fail" $O/verify.txt | head -8 | cut -c1-200
G=$O/gemv.txt
for r in 1 2; do for c in "X=0" "FLEXKERN_GEMV_BULK=0" "FLEXKERN_GEMV_BULK=3" "FLEXKERN_GEMV_BULK=2"; do
  echo "== $r [$c]" >> $G
  env $c timeout 60 ./flexkern bench gemv --device cuda --graph --reps 20 --formats q4_0,q4_k,q8_0 --n 14336,4096 --k 4096 >> $G 2>&1
  env $c timeout 60 ./flexkern bench gemv --device cuda --graph --reps 20 --formats q4_0,q4_k,q8_0 --n 4096 --k 14336 >> $G 2>&1
done; done
grep -E "^==|^q" $G | awk '/^==/{print; next} {printf "  %s %s %s %s %s\n", $1,$2,$3,$6,$NF}'
date -u +%FT%TZ
L=$O/runs.txt
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
timeout 90 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
for r in 1 2; do for m in b s; do for c in "./flexkern X=0" "./flexkern FLEXKERN_GEMV_BULK=0" "./flexkern_old X=0"; do set -- $c
  env $2 timeout 40 $1 run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $L; echo "$m rc=$? [$c] $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done; done
rm -f $O/out.txt
FLEXKERN_CUDA_TRACE=step timeout 100 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 48 --temperature 0 --ctx 160 > /dev/null 2> $O/step_8b.txt; echo "step rc=$?"
tr '\r' '\n' < $O/step_8b.txt | grep -v "^\s*$" | grep -E "fk_|replay 32" | cut -c1-150 | head -10
date -u +%FT%TZ
