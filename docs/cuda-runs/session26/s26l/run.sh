#!/bin/bash
# Session 26 call l (closing code 4c5ff6f): verify; bench gemv --graph against call h's binary
# (fbaa144, flexkern_old), alternating; 8B decode alternating (Q4_0, Q4_K_M, Q8_0); SmolLM2;
# bench attn decode and prefill once.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s26l; mkdir -p $O
date -u +%FT%TZ
(for m in q4_0 q4_k_m q8_0; do timeout 150 ./flexkern synth-model --shape llama3-8b --format $m --tokenizer bytes --vocab 49152 --out /tmp/$m.gguf > /dev/null 2>&1; echo "synth $m rc=$?"; done
 timeout 60 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/smol.gguf > /dev/null 2>&1; echo "synth smol rc=$?") > $O/synth.txt 2>&1 &
timeout 300 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.txt | cut -c1-200 | head -20
date -u +%FT%TZ
for r in 1 2; do for b in flexkern flexkern_old; do for k in 4096 14336; do
  timeout 60 ./$b bench gemv --device cuda --graph --reps 20 --n 4096,14336 --k $k --formats q4_0,q4_k,q6_k,q8_0,f16 > $O/g.txt 2>&1
  echo "== $b round $r k$k" >> $O/gemv.txt; cat $O/g.txt >> $O/gemv.txt
  echo "$b k$k: $(grep -E '^ *(q4_k|q4_0|q8_0|q6_k|f16) ' $O/g.txt | awk '{printf "%s %s %s %s | ", $1, $2, $5, $6}')"
done; done; done
date -u +%FT%TZ
wait; cat $O/synth.txt
S="The three laws of robotics are"
for m in q4_0 q4_k_m q8_0; do for r in 1 2; do for b in flexkern flexkern_old; do
  timeout 40 ./$b run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $O/runs.txt; echo "$m $b rc=$? $(tail -c 300 $O/runs.txt | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done; done
for r in 1 2; do
  timeout 40 ./flexkern run --device cuda --model /tmp/smol.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $O/runs.txt; echo "smol rc=$? $(tail -c 300 $O/runs.txt | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done
date -u +%FT%TZ
timeout 120 ./flexkern bench attn --device cuda > $O/attn.txt 2>&1; echo "attn rc=$?"
grep -E "^copy|^decode|^prefill|^chunked" $O/attn.txt | cut -c1-110
date -u +%FT%TZ
