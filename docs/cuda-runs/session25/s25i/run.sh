#!/bin/bash
# Session 25 call i (H200): Q8_0 and Q8_K activation codes permuted in shared memory by 16-byte
# chunks (no bank conflicts on the units' reads). verify; bench gemv --graph against HEAD's
# binary (flexkern_old), alternating, two rounds; 8B Q4_0 and Q4_K_M decode alternating; the
# prefill bench once.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s25i; mkdir -p $O
date -u +%FT%TZ
(for m in q4_0 q4_k_m; do timeout 150 ./flexkern synth-model --shape llama3-8b --format $m --tokenizer bytes --vocab 49152 --out /tmp/$m.gguf > /dev/null 2>&1; echo "synth $m rc=$?"; done > $O/synth.txt) &
timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.txt | cut -c1-160 | head -20
date -u +%FT%TZ
for r in 1 2; do for b in flexkern flexkern_old; do
  timeout 90 ./$b bench gemv --device cuda --graph --reps 20 --formats q4_0,q8_0,q4_k,q6_k > $O/g.txt 2>&1
  echo "== $b round $r" >> $O/gemv.txt; cat $O/g.txt >> $O/gemv.txt
  echo "$b: $(grep -E '^ *(q4_k|q4_0|q8_0|q6_k) ' $O/g.txt | awk '{printf "%s %s %s | ", $1, $2, $6}')"
done; done
date -u +%FT%TZ
wait; cat $O/synth.txt
S="The three laws of robotics are"
L=$O/runs.txt
for m in q4_0 q4_k_m; do for r in 1 2; do for b in flexkern flexkern_old; do
  timeout 40 ./$b run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $L; echo "$m $b rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done; done
date -u +%FT%TZ
timeout 90 ./flexkern bench attn --device cuda --only prefill > $O/prefill.txt 2>&1; echo "prefill rc=$? $(grep -E '^(prefill|chunked)' $O/prefill.txt | awk '{printf "%.0f|", $(NF-5)/1000}')"
date -u +%FT%TZ
