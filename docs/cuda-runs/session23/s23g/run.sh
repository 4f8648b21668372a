#!/bin/bash
# Session 23 call g (H200): which launches gain from pairs of blocks at k = 4096: the 8B step
# timelines and GEMV bench, default (pairs for k >= 8192 only) against FLEXKERN_GEMV_CLUSTER=2.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s23g; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
for f in q4_0 q4_k_m; do timeout 120 ./flexkern synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/$f.gguf > /dev/null 2>&1; echo "synth $f rc=$?"; done
for m in q4_0 q4_k_m; do
for c in d 2 d 2; do
  if [ $c = d ]; then unset FLEXKERN_GEMV_CLUSTER; else export FLEXKERN_GEMV_CLUSTER=$c; fi
  FLEXKERN_CUDA_TRACE=step timeout 60 ./flexkern run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 64 --temperature 0 --ctx 160 > $O/trace_${m}_$c.txt 2>&1; echo "trace $m c=$c rc=$? $(grep -o 'decode:[^|]*' $O/trace_${m}_$c.txt | tail -1)"
  grep -E "^\s+fk_gemv" $O/trace_${m}_$c.txt | sed 's/after fk_gemv//' | cut -c1-130
done
done
unset FLEXKERN_GEMV_CLUSTER
G="bench gemv --device cuda --graph --reps 20 --formats q4_0,q8_0,q4_k,q6_k --n 4096,6144 --k 4096"
for c in d 2 d 2; do
  if [ $c = d ]; then unset FLEXKERN_GEMV_CLUSTER; else export FLEXKERN_GEMV_CLUSTER=$c; fi
  timeout 60 ./flexkern $G > $O/gemv_$c.txt 2>&1; echo "gemv c=$c rc=$?"
  grep -E "^q" $O/gemv_$c.txt | awk '{print "  ",$1,$2,$3,$4,$6}' | tr '\n' ';'; echo
done
date -u +%FT%TZ
