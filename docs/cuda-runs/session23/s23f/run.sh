#!/bin/bash
# Session 23 call f (H200), the final GPU code: pairs of blocks share the activation prologue
# for rows of >= 8192 (FK_SCL 2). verify; memcheck on a cluster GEMV; GEMV bench new/old;
# decode new/old alternating (8B Q4_0, Q4_K_M, Q8_0; SmolLM2); the attention bench.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s23f; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 240 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E " fail" $O/verify.txt | head -5; tail -2 $O/verify.txt
date -u +%FT%TZ
timeout 150 compute-sanitizer --tool memcheck ./flexkern bench gemv --device cuda --formats q4_0,q4_k --n 4096 --k 14336 --reps 2 > $O/memcheck.txt 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|_c2" $O/memcheck.txt | head -4
date -u +%FT%TZ
G="bench gemv --device cuda --graph --reps 20 --formats q4_0,q8_0,q4_k,q6_k"
for b in flexkern flexkern_old flexkern flexkern_old; do
  timeout 60 ./$b $G --n 14336,4096 --k 4096 > $O/gemv_$b.txt 2>&1
  timeout 60 ./$b $G --n 4096 --k 14336 >> $O/gemv_$b.txt 2>&1; echo "gemv $b rc=$?"
  grep -E "^q" $O/gemv_$b.txt | awk '{print "  ",$1,$2,$3,$4,$6}' | tr '\n' ';'; echo
done
date -u +%FT%TZ
for f in q4_0 q4_k_m q8_0; do timeout 120 ./flexkern synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/$f.gguf > /dev/null 2>&1; echo "synth $f rc=$?"; done
timeout 60 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1; echo "synth rc=$?"
L=$O/runs.txt
for m in q4_0 q4_k_m q8_0 s; do
  for r in 1 2; do
    for b in flexkern flexkern_old; do
      timeout 40 ./$b run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out_${m}_$b.txt 2>> $L; echo "$m $b rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out_${m}_$b.txt | cut -c1-8)"
    done
  done
done
FLEXKERN_CUDA_TRACE=step timeout 60 ./flexkern run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 64 --temperature 0 --ctx 160 > $O/trace_q4_0.txt 2>&1; echo "trace rc=$?"; grep -E "^\s+fk_gemv" $O/trace_q4_0.txt | cut -c1-150
date -u +%FT%TZ
timeout 200 ./flexkern bench attn --device cuda > $O/bench_attn.txt 2>&1; echo "bench attn rc=$?"
grep -E "^decode|^prefill|^chunked" $O/bench_attn.txt | cut -c1-110
date -u +%FT%TZ
