#!/bin/bash
# Session 23 call h (H200), the final GPU code: verify; GEMV bench; decode new/old alternating;
# the 8B step timeline; the decode attention bench.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s23h; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E " fail" $O/verify.txt | head -5; tail -2 $O/verify.txt
date -u +%FT%TZ
timeout 60 ./flexkern bench gemv --device cuda --graph --reps 20 --formats q4_0,q8_0,q4_k,q6_k,f16 > $O/gemv.txt 2>&1
timeout 60 ./flexkern bench gemv --device cuda --graph --reps 20 --formats q4_0,q8_0,q4_k,q6_k --n 4096 --k 14336 >> $O/gemv.txt 2>&1; echo "gemv rc=$?"
grep -E "^(q|f16)" $O/gemv.txt | awk '{print "  ",$1,$2,$3,$4,$5,$6,$NF}'
for f in q4_0 q4_k_m; do timeout 120 ./flexkern synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/$f.gguf > /dev/null 2>&1; echo "synth $f rc=$?"; done
L=$O/runs.txt
for m in q4_0 q4_k_m; do
  for r in 1 2; do
    for b in flexkern flexkern_old; do
      timeout 40 ./$b run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out_${m}_$b.txt 2>> $L; echo "$m $b rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out_${m}_$b.txt | cut -c1-8)"
    done
  done
done
FLEXKERN_CUDA_TRACE=step timeout 60 ./flexkern run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 64 --temperature 0 --ctx 160 > $O/trace_q4_0.txt 2>&1; echo "trace rc=$?"; grep -E "^\s+fk_|step:|launches" $O/trace_q4_0.txt | cut -c1-140 | head -12
date -u +%FT%TZ
timeout 60 ./flexkern bench attn --device cuda --only decode > $O/bench_attn.txt 2>&1; echo "bench attn rc=$?"
grep -E "^decode" $O/bench_attn.txt | cut -c1-110
date -u +%FT%TZ
