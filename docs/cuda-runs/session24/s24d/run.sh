#!/bin/bash
# Session 24 call d (H200), the closing GEMV code: verify; GEMV bench new (Q8_K one pass only
# with the norm) against call c's binary, and the cuBLAS peer; 8B Q4_0 / Q4_K_M decode
# alternating; decode attention bench; compute-sanitizer memcheck on verify --quick.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin FLEXKERN_GEMV_PF=0
O=$OUT/s24d; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E " fail" $O/verify.txt | head -5; tail -2 $O/verify.txt
date -u +%FT%TZ
for r in 1 2; do for b in flexkern flexkern_old; do
  echo "== $b round $r" >> $O/gemv.txt
  timeout 60 ./$b bench gemv --device cuda --graph --reps 20 --formats q4_0,q8_0,q4_k,q6_k,f16 > $O/g.txt 2>&1
  cat $O/g.txt >> $O/gemv.txt
  echo "$b r$r: $(grep -E '^(q|f16)' $O/g.txt | awk '{printf "%s %s %s %s | ", $1,$2,$3,$6}')"
done; done
grep -E "^copy" $O/gemv.txt | head -4
PYTHONUNBUFFERED=1 timeout 100 python3 gemv_peers_cuda.py --graph > $O/gemv_peers.txt 2>&1; echo "gemv peers rc=$?"; tail -9 $O/gemv_peers.txt
date -u +%FT%TZ
for f in q4_0 q4_k_m; do timeout 120 ./flexkern synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/$f.gguf > /dev/null 2>&1; echo "synth $f rc=$?"; done
L=$O/runs.txt
for m in q4_0 q4_k_m; do for r in 1 2; do for b in flexkern flexkern_old; do
  timeout 40 ./$b run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $L; echo "$m $b rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done; done
date -u +%FT%TZ
timeout 60 ./flexkern bench attn --device cuda --only decode > $O/bench_attn.txt 2>&1; echo "bench attn rc=$?"
grep -E "^(decode|copy)" $O/bench_attn.txt | cut -c1-120
date -u +%FT%TZ
timeout 220 compute-sanitizer --tool memcheck ./flexkern verify --device cuda --quick > $O/memcheck.txt 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.txt | tail -3
date -u +%FT%TZ
