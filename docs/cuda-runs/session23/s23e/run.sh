#!/bin/bash
# Session 23 call e (H200): the activation prologue shared by clusters of blocks (gemv_acts.cu,
# FK_SCL). verify; step timelines (released after the prologue) new/old; GEMV bench by cluster
# size and old; decode alternating.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s23e; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 240 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "fail|FAIL" $O/verify.txt | head -5; tail -2 $O/verify.txt
date -u +%FT%TZ
timeout 120 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/q4_0.gguf > /dev/null 2>&1; echo "synth rc=$?"
timeout 120 ./flexkern synth-model --shape llama3-8b --format q4_k_m --tokenizer bytes --vocab 49152 --out /tmp/q4_k_m.gguf > /dev/null 2>&1; echo "synth rc=$?"
timeout 60 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1; echo "synth rc=$?"
for b in flexkern flexkern_old; do
  FLEXKERN_CUDA_TRACE=step,prologue timeout 60 ./$b run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 64 --temperature 0 --ctx 160 > $O/trace_q4_0_$b.txt 2>&1; echo "trace $b rc=$?"
  grep -E "^\s+fk_" $O/trace_q4_0_$b.txt | sed 's/after fk_gemv//' | cut -c1-150
done
date -u +%FT%TZ
G="bench gemv --device cuda --graph --reps 20 --formats q4_0,q8_0,q4_k,q6_k"
for v in "4 flexkern" "1 flexkern" "x flexkern_old" "2 flexkern" "8 flexkern" "4 flexkern"; do
  set -- $v
  FLEXKERN_GEMV_CLUSTER=$1 timeout 60 ./$2 $G --n 14336,4096 --k 4096 > $O/gemv_$1_$2.txt 2>&1
  FLEXKERN_GEMV_CLUSTER=$1 timeout 60 ./$2 $G --n 4096 --k 14336 >> $O/gemv_$1_$2.txt 2>&1; echo "gemv c=$1 $2 rc=$?"
  grep -E "^q" $O/gemv_$1_$2.txt | awk '{print "  ",$1,$2,$3,$4,$6}' | tr '\n' ';'; echo
done
date -u +%FT%TZ
L=$O/runs.txt
for v in "q4_0 4 flexkern" "q4_0 x flexkern_old" "q4_0 2 flexkern" "q4_0 8 flexkern" "q4_0 4 flexkern" "q4_0 x flexkern_old" "q4_k_m 4 flexkern" "q4_k_m x flexkern_old" "q4_k_m 4 flexkern" "q4_k_m x flexkern_old" "s 4 flexkern" "s x flexkern_old" "s 4 flexkern" "s x flexkern_old"; do
  set -- $v
  FLEXKERN_GEMV_CLUSTER=$2 timeout 40 ./$3 run --device cuda --model /tmp/$1.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out_$1_$3.txt 2>> $L; echo "$1 c=$2 $3 rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out_$1_$3.txt | cut -c1-8)"
done
date -u +%FT%TZ
