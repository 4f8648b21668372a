#!/bin/bash
# Session 23 call c (H200): the activation prologue's loads first (gemv_acts.cu). verify; the
# step timeline (released after the prologue) new vs old; decode new/old alternating; GEMV
# graph bench new/old.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s23c; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 120 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/q4_0.gguf > /dev/null 2>&1; echo "synth rc=$?"
for b in flexkern flexkern_old; do
  FLEXKERN_CUDA_TRACE=step,prologue timeout 60 ./$b run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 64 --temperature 0 --ctx 160 > $O/trace_prologue_$b.txt 2>&1; echo "trace $b rc=$?"
  grep -E "^\s+fk_" $O/trace_prologue_$b.txt | sed 's/after fk_gemv//' | cut -c1-150
done
timeout 240 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; tail -4 $O/verify.txt
date -u +%FT%TZ
G="bench gemv --device cuda --graph --reps 20 --formats q4_0,q8_0,q4_k,q6_k"
for b in flexkern flexkern_old flexkern; do
  timeout 60 ./$b $G --n 14336 --k 4096 > $O/gemv_$b.txt 2>&1
  timeout 60 ./$b $G --n 4096 --k 14336 >> $O/gemv_$b.txt 2>&1; echo "gemv $b rc=$?"
  grep -E "^q" $O/gemv_$b.txt | awk '{print "  ",$1,$2,$3,$4,$6}' | tr '\n' ';'; echo
done
date -u +%FT%TZ
L=$O/runs.txt
timeout 120 ./flexkern synth-model --shape llama3-8b --format q4_k_m --tokenizer bytes --vocab 49152 --out /tmp/q4_k_m.gguf > /dev/null 2>&1; echo "synth rc=$?"
timeout 60 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1; echo "synth rc=$?"
for m in q4_0 q4_k_m s; do
  for r in 1 2; do
    for b in flexkern flexkern_old; do
      timeout 40 ./$b run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out_${m}_$b.txt 2>> $L; echo "$m $b rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out_${m}_$b.txt | cut -c1-8)"
    done
  done
done
date -u +%FT%TZ
