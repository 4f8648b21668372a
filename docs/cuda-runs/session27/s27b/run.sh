#!/bin/bash
# Session 27 call b: whole live K/V tiles staged without per-row checks and V's fp8 bytes paired
# by PRMT (decode attention, mma.sync kernel); window-evicted paged verify cases. verify; decode
# bench alternating with call a's binary (flexkern_old); memcheck on verify --quick; greedy text.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s27b; mkdir -p $O
date -u +%FT%TZ
(for m in q4_0; do timeout 100 ./flexkern synth-model --shape llama3-8b --format $m --tokenizer bytes --vocab 49152 --out /tmp/$m.gguf > /dev/null 2>&1; echo "synth $m rc=$?"; done; timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1; echo "synth smollm2 rc=$?") > $O/synth.txt 2>&1 &
timeout 170 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules|evicted" $O/verify.txt | cut -c1-160 | head -24
date -u +%FT%TZ
for r in 1 2; do for b in flexkern flexkern_old; do
  timeout 60 ./$b bench attn --device cuda --only decode > $O/a.txt 2>&1
  echo "== $b round $r" >> $O/attn.txt; cat $O/a.txt >> $O/attn.txt
  echo "$b: $(grep -E '^decode' $O/a.txt | awk '{printf "%s ", $(NF-3)}')"
done; done
grep -E "^  decode" $O/a.txt | cut -c1-60,100-330 | head -10
date -u +%FT%TZ
wait; cat $O/synth.txt
S="The three laws of robotics are"
for m in q4_0 s; do for b in flexkern flexkern_old; do
  timeout 30 ./$b run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $O/runs.txt; echo "$m $b rc=$? $(tail -c 300 $O/runs.txt | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done
date -u +%FT%TZ
timeout 240 compute-sanitizer --tool memcheck ./flexkern verify --device cuda --quick > $O/memcheck.txt 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.txt | tail -3
date -u +%FT%TZ
