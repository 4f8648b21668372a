#!/bin/bash
# Session 26 call p (closing code 9029b22): verify; bench gemv --graph against call l's binary
# (4c5ff6f, flexkern_old), alternating; 8B Q4_0 and Q4_K_M decode alternating.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s26p; mkdir -p $O
date -u +%FT%TZ
(for m in q4_0 q4_k_m; do timeout 100 ./flexkern synth-model --shape llama3-8b --format $m --tokenizer bytes --vocab 49152 --out /tmp/$m.gguf > /dev/null 2>&1; echo "synth $m rc=$?"; done > $O/synth.txt 2>&1) &
timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.txt | cut -c1-200 | head -20
date -u +%FT%TZ
for r in 1 2; do for b in flexkern flexkern_old; do for k in 4096 14336; do
  timeout 40 ./$b bench gemv --device cuda --graph --reps 20 --n 4096,14336 --k $k --formats q4_0,q4_k,q6_k,q8_0 > $O/g.txt 2>&1
  echo "== $b round $r k$k" >> $O/gemv.txt; cat $O/g.txt >> $O/gemv.txt
  echo "$b k$k: $(grep -E '^ *(q4_k|q4_0|q8_0|q6_k) ' $O/g.txt | awk '{printf "%s %s %s %s | ", $1, $2, $5, $6}')"
done; done; done
wait; cat $O/synth.txt
S="The three laws of robotics are"
for m in q4_0 q4_k_m; do for r in 1 2; do for b in flexkern flexkern_old; do
  timeout 30 ./$b run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $O/runs.txt; echo "$m $b rc=$? $(tail -c 300 $O/runs.txt | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done; done
date -u +%FT%TZ
