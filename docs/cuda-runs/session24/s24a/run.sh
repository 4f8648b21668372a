#!/bin/bash
# Session 24 call a (H200): verify (first run of session 23's k 8192 cases); the L2 prefetch
# before the wait (FLEXKERN_GEMV_PF) against none, GEMV bench and 8B decode alternating.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s24a; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E " fail" $O/verify.txt | head -5; tail -2 $O/verify.txt
date -u +%FT%TZ
for r in 1 2; do for pf in "" 0; do
  echo "== gemv PF=${pf:-default} round $r" >> $O/gemv.txt
  FLEXKERN_GEMV_PF=$pf timeout 60 ./flexkern bench gemv --device cuda --graph --reps 20 --formats q4_0,q8_0,q4_k,q6_k > $O/g.txt 2>&1
  FLEXKERN_GEMV_PF=$pf timeout 60 ./flexkern bench gemv --device cuda --graph --reps 20 --formats q4_0,q8_0,q4_k,q6_k --n 4096 --k 14336 >> $O/g.txt 2>&1
  cat $O/g.txt >> $O/gemv.txt
  echo "PF=${pf:-default} r$r: $(grep -E '^(q|f16)' $O/g.txt | awk '{printf "%s %s %s %s | ", $1,$2,$3,$NF}')"
done; done
date -u +%FT%TZ
for f in q4_0 q4_k_m; do timeout 120 ./flexkern synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/$f.gguf > /dev/null 2>&1; echo "synth $f rc=$?"; done
L=$O/runs.txt
run() { # model PF label
  FLEXKERN_GEMV_PF=$2 timeout 40 ./flexkern run --device cuda --model /tmp/$1.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $L; echo "$1 PF=${2:-default} rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
}
for r in 1 2; do for pf in "" 0 2048 16384; do run q4_0 "$pf"; done; done
for r in 1 2; do for pf in "" 0; do run q4_k_m "$pf"; done; done
date -u +%FT%TZ
FLEXKERN_CUDA_TRACE=step,prologue timeout 60 ./flexkern run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 64 --temperature 0 --ctx 160 > $O/trace_q4_0.txt 2>&1; echo "trace rc=$?"; grep -E "^\s+fk_|step:|launches" $O/trace_q4_0.txt | cut -c1-140 | head -14
FLEXKERN_GEMV_PF=0 FLEXKERN_CUDA_TRACE=step,prologue timeout 60 ./flexkern run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 64 --temperature 0 --ctx 160 > $O/trace_q4_0_pf0.txt 2>&1; echo "trace pf0 rc=$?"; grep -E "^\s+fk_|step:|launches" $O/trace_q4_0_pf0.txt | cut -c1-140 | head -14
date -u +%FT%TZ
