#!/bin/bash
# Session 24 call c (H200): verify; the prologue's one pass with the fused norm (Q8_0 and Q8_K)
# and Q8_K's two blocks side by side, new against old (call b's lanes binary, FLEXKERN_GEMV_PF=0
# so it runs 5530fbb's kernels), GEMV bench and 8B Q4_0 / Q4_K_M decode alternating; traces.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin FLEXKERN_GEMV_PF=0
O=$OUT/s24c; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E " fail" $O/verify.txt | head -5; tail -2 $O/verify.txt
date -u +%FT%TZ
for r in 1 2; do for b in flexkern flexkern_old; do
  echo "== $b round $r" >> $O/gemv.txt
  timeout 60 ./$b bench gemv --device cuda --graph --reps 20 --formats q4_0,q8_0,q4_k,q6_k > $O/g.txt 2>&1
  cat $O/g.txt >> $O/gemv.txt
  echo "$b r$r: $(grep -E '^(q|f16)' $O/g.txt | awk '{printf "%s %s %s %s | ", $1,$2,$3,$6}')"
done; done
date -u +%FT%TZ
for f in q4_0 q4_k_m; do timeout 120 ./flexkern synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/$f.gguf > /dev/null 2>&1; echo "synth $f rc=$?"; done
L=$O/runs.txt
for m in q4_0 q4_k_m; do for r in 1 2; do for b in flexkern flexkern_old; do
  timeout 40 ./$b run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $L; echo "$m $b rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done; done
date -u +%FT%TZ
for m in q4_0 q4_k_m; do
FLEXKERN_CUDA_TRACE=step,prologue timeout 60 ./flexkern run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 64 --temperature 0 --ctx 160 > $O/trace_$m.txt 2>&1; echo "trace $m rc=$?"; grep -E "^\s+fk_" $O/trace_$m.txt | cut -c1-150 | head -8
done
FLEXKERN_CUDA_TRACE=step,prologue timeout 60 ./flexkern_old run --device cuda --model /tmp/q4_k_m.gguf --prompt "$S" -n 64 --temperature 0 --ctx 160 > $O/trace_q4_k_m_old.txt 2>&1; echo "trace old q4_k_m rc=$?"; grep -E "^\s+fk_" $O/trace_q4_k_m_old.txt | cut -c1-150 | head -8
date -u +%FT%TZ
