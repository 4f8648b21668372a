#!/bin/bash
# Session 29 call k, the closing code (the 128-byte L2 rule, fdfee38; docs since): verify; the
# 8B Q4_0 / Q4_K_M and SmolLM2 Q4_0 decode, two rounds each, with their greedy texts' md5.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/k; mkdir -p $O
F=../../../../.devcarry/s29k/flexkern
date -u +%FT%TZ
(for m in "llama3-8b q4_0 q4_0" "llama3-8b q4_k_m q4_k_m" "smollm2-135m q4_0 s"; do set -- $m
  timeout 150 $F synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/$3.gguf > /dev/null 2>&1; echo "synth $3 rc=$?"; done) > $O/synth.log 2>&1 &
timeout 200 $F verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.log | cut -c1-200 | head -12
date -u +%FT%TZ
wait; cat $O/synth.log
S="The three laws of robotics are"
for r in 1 2; do for m in q4_0 q4_k_m s; do
  timeout 40 $F run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$m rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done
rm -f $O/out.log
date -u +%FT%TZ
