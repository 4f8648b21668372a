#!/bin/bash
# Session 12 call g (H100): the final binary (decode_graph's step queued by one closure; docs).
# verify, verify-model, greedy graph vs eager past the plan's split, one 8B decode.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s12g; mkdir -p $O
date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
P="The three laws of robotics are"
echo "== verify"; timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -20; tail -2 $O/verify.txt
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
echo "== verify-model smollm2 q4_0"; timeout 60 ./flexkern verify-model --device cuda --model /tmp/s.gguf > $O/vm.txt 2>&1; echo rc=$?; tail -1 $O/vm.txt
timeout 60 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$P" -n 600 --temperature 0 --ctx 700 > /tmp/g.txt 2>/tmp/ge.txt; echo "graph rc=$? $(grep -h decode /tmp/ge.txt | tail -1 | cut -c1-75)"
FLEXKERN_CUDA_GRAPH=0 timeout 60 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$P" -n 600 --temperature 0 --ctx 700 > /tmp/e.txt 2>/tmp/ee.txt; echo "eager rc=$? $(grep -h decode /tmp/ee.txt | tail -1 | cut -c1-75)"
cmp /tmp/g.txt /tmp/e.txt && echo "identical text ($(wc -c < /tmp/g.txt) bytes)"
