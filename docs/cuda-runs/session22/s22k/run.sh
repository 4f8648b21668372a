#!/bin/bash
# Session 22 call k (H200), the final code 57f335e (call j's code with the GEMV stream plan and the
# attention planner moved into their own files): verify, verify-model, SmolLM2 and 8B Q4_0 decode through the graph, decode bench.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s22k; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "^verify:|modules" $O/verify.txt | tail -2; grep -iE " fail" $O/verify.txt | head -5 | cut -c1-200
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
timeout 120 ./flexkern verify-model --device cuda --model /tmp/s.gguf > $O/verify_model.txt 2>&1; echo "verify-model rc=$?"; tail -1 $O/verify_model.txt | cut -c1-200
timeout 90 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
L=$O/runs.txt
for m in s b s b; do
  timeout 40 ./flexkern run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $L; echo "$m rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done
rm -f $O/out.txt
timeout 60 ./flexkern bench attn --device cuda --only decode > $O/decode.txt 2>&1; echo "decode rc=$?"
grep -E "^decode" $O/decode.txt | awk '{printf "%s ", $(NF-2)} END {print ""}'
date -u +%FT%TZ
