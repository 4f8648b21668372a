#!/bin/bash
# Session 27 call g: decode warps stage their own keys (no block barrier in the loop) and queue
# the next tile before waiting for the current one. verify; memcheck on verify --quick; decode
# bench alternating with call f's binary (flexkern_f, 8af5f45), three rounds; greedy text.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s27g; mkdir -p $O
date -u +%FT%TZ
(timeout 100 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/q4_0.gguf > /dev/null 2>&1; echo "synth q4_0 rc=$?"; timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1; echo "synth smollm2 rc=$?") > $O/synth.log 2>&1 &
timeout 170 ./flexkern verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.log | cut -c1-160 | head -24
timeout 240 compute-sanitizer --tool memcheck ./flexkern verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
date -u +%FT%TZ
for r in 1 2 3; do for b in flexkern flexkern_f; do
  timeout 60 ./$b bench attn --device cuda --only decode > $O/a.log 2>&1
  echo "== $b round $r" >> $O/attn.log; cat $O/a.log >> $O/attn.log
  echo "$b: $(grep -E '^decode' $O/a.log | awk '{printf "%s ", $(NF-3)}')"
done; done
date -u +%FT%TZ
wait; cat $O/synth.log
S="The three laws of robotics are"
for r in 1 2; do for m in q4_0 s; do for b in flexkern flexkern_f; do
  timeout 30 ./$b run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$m $b rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done; done
date -u +%FT%TZ
