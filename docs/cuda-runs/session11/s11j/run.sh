#!/bin/bash
# Session 11 call j (H100): the final binary after the review (the kernel choice moved to
# quant/choose.rs, shared verify helpers): verify, memcheck of verify --quick, verify-model, a
# GEMV and a decode check.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s11j; mkdir -p $O
date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== verify"; timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -20; tail -2 $O/verify.txt
echo "== memcheck verify --quick"; timeout 170 compute-sanitizer --tool memcheck ./flexkern verify --device cuda --quick > $O/memcheck.txt 2>&1; echo rc=$?; grep -E "^verify|ERROR SUMMARY" $O/memcheck.txt | tail -3
P="The three laws of robotics are"
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
echo "== verify-model"; timeout 60 ./flexkern verify-model --device cuda --model /tmp/s.gguf > $O/vm.txt 2>&1; echo rc=$?; tail -1 $O/vm.txt
echo "== gemv"; timeout 40 ./flexkern bench gemv --device cuda --n 14336 --k 4096 --reps 20 --formats q8_0,q4_0,q4_k,q6_k > $O/gemv.txt 2>&1; echo rc=$?; grep -E "^(copy|q)" $O/gemv.txt | cut -c1-62
timeout 40 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/m.gguf > /dev/null 2>&1
timeout 40 ./flexkern run --device cuda --model /tmp/m.gguf --prompt "$P" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1
for i in 1 2; do timeout 40 ./flexkern run --device cuda --model /tmp/m.gguf --prompt "$P" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >/dev/null; echo "llama3-8b q4_0 rc=$? $(grep -h decode $O/r.txt | tail -1 | cut -c1-75)"; done
