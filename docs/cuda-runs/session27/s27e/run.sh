#!/bin/bash
# Session 27 call e: decode blocks of at most 8 rows skip the empty row half (scores, softmax,
# rescale) and rescale O per warp only where a row max moved. verify; decode bench alternating
# with call c's binary (flexkern_c, 8af5f45); greedy text of 8B Q4_0 and SmolLM2.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s27e; mkdir -p $O
date -u +%FT%TZ
(timeout 100 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/q4_0.gguf > /dev/null 2>&1; echo "synth q4_0 rc=$?"; timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1; echo "synth smollm2 rc=$?") > $O/synth.txt 2>&1 &
timeout 170 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.txt | cut -c1-160 | head -24
date -u +%FT%TZ
for r in 1 2 3; do for b in flexkern flexkern_c; do
  timeout 60 ./$b bench attn --device cuda --only decode > $O/a.txt 2>&1
  echo "== $b round $r" >> $O/attn.txt; cat $O/a.txt >> $O/attn.txt
  echo "$b: $(grep -E '^decode' $O/a.txt | awk '{printf "%s ", $(NF-3)}')"
done; done
date -u +%FT%TZ
wait; cat $O/synth.txt
S="The three laws of robotics are"
for r in 1 2; do for m in q4_0 s; do for b in flexkern flexkern_c; do
  timeout 30 ./$b run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $O/runs.txt; echo "$m $b rc=$? $(tail -c 300 $O/runs.txt | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done; done
date -u +%FT%TZ
