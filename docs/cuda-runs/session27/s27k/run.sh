#!/bin/bash
# Session 27 call k, the closing code: the unit loads through load_at again, now with the side
# entry's address worked out after the codes' load (Q4_0 / Q8_0 SASS identical to 8af5f45's in
# every dumped module). verify; memcheck on verify --quick; bench gemv --graph and 8B Q4_0 /
# Q4_K_M decode alternating with call f's binary (flexkern_f, 8af5f45).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s27k; mkdir -p $O
date -u +%FT%TZ
(for m in q4_0 q4_k_m; do timeout 100 ./flexkern synth-model --shape llama3-8b --format $m --tokenizer bytes --vocab 49152 --out /tmp/$m.gguf > /dev/null 2>&1; echo "synth $m rc=$?"; done) > $O/synth.log 2>&1 &
timeout 170 ./flexkern verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.log | cut -c1-160 | head -24
timeout 240 compute-sanitizer --tool memcheck ./flexkern verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
date -u +%FT%TZ
for b in flexkern flexkern_f; do
  timeout 40 ./$b bench gemv --device cuda --graph --reps 20 --n 4096,6144,14336 --k 4096 --formats q4_0,q4_k,q8_0 > $O/g.log 2>&1
  echo "== $b" >> $O/gemv.log; cat $O/g.log >> $O/gemv.log
  echo "$b: $(grep -E '^ *(q4_k|q4_0|q8_0|q6_k) ' $O/g.log | awk '{printf "%s %s %s | ", $1, $2, $6}')"
done
wait; cat $O/synth.log
S="The three laws of robotics are"
for r in 1 2; do for m in q4_0 q4_k_m; do for b in flexkern flexkern_f; do
  timeout 30 ./$b run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$m $b rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done; done
date -u +%FT%TZ
