#!/bin/bash
# Session 14 call n (H100): the closing binary (the dot lambda compiled only where used; no
# kernel arithmetic changed): verify, verify-model (Q4_0, Q8_0, Q4_K_M), memcheck on a short
# Q4_0 run, graph = eager, and bench gemv --graph at the issue's shapes.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s14n; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 240 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -12; tail -2 $O/verify.txt
P=$(python3 -c "print(('The three laws of robotics are a set of rules devised by the science fiction author Isaac Asimov. ' * 8)[:200])")
for f in q4_0 q8_0 q4_k_m; do
  timeout 30 ./flexkern synth-model --shape smollm2-135m --format $f --tokenizer bytes --vocab 49152 --out /tmp/s_$f.gguf > /dev/null 2>&1
  for p in precise default; do timeout 60 ./flexkern verify-model --device cuda --gpu-path $p --model /tmp/s_$f.gguf --tokens 64 > $O/vm_${f}_$p.txt 2>&1; echo "verify-model $f $p rc=$?: $(tail -1 $O/vm_${f}_$p.txt)"; done
done
timeout 150 compute-sanitizer --tool memcheck --print-limit 5 ./flexkern run --device cuda --model /tmp/s_q4_0.gguf --prompt "$P" -n 8 --temperature 0 --ctx 256 > $O/memcheck.txt 2>&1; echo "memcheck q4_0 rc=$?: $(grep -E 'ERROR SUMMARY' $O/memcheck.txt)"
S="The three laws of robotics are"
timeout 60 ./flexkern run --device cuda --model /tmp/s_q4_0.gguf --prompt "$S" -n 600 --temperature 0 --ctx 700 > /tmp/g.txt 2>$O/g.txt
FLEXKERN_CUDA_GRAPH=0 timeout 60 ./flexkern run --device cuda --model /tmp/s_q4_0.gguf --prompt "$S" -n 600 --temperature 0 --ctx 700 > /tmp/e.txt 2>/dev/null
cmp /tmp/g.txt /tmp/e.txt && echo "graph = eager over 600 tokens ($(wc -c < /tmp/g.txt) bytes); $(grep -o 'decode:.*' $O/g.txt | cut -c1-40)"
./flexkern bench gemv --device cuda --graph --reps 20 --formats f16,q8_0,q4_0,q4_k,q6_k --n 14336,4096 --k 4096 > $O/gemv.txt 2>&1
./flexkern bench gemv --device cuda --graph --reps 20 --formats q8_0,q4_0,q4_k,q6_k --n 4096 --k 14336 >> $O/gemv.txt 2>&1
grep -E "^(f16|q8_0|q4_0|q4_k|q6_k|copy)" $O/gemv.txt | awk '{print $1,$2,$3,$4,$5,$6}' | tr '\n' ';'; echo
date -u +%FT%TZ
