#!/bin/bash
# Session 13 call r (H100): the final binary (graph recording without the backend type,
# the model's buffers module): verify (graph replay checks), verify-model both paths, memcheck.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s13r; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 240 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -12; tail -2 $O/verify.txt
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
for p in precise default; do timeout 60 ./flexkern verify-model --device cuda --gpu-path $p --model /tmp/s.gguf --tokens 64 > $O/vm_$p.txt 2>&1; echo "verify-model $p rc=$?: $(tail -1 $O/vm_$p.txt)"; done
P=$(python3 -c "print(('The three laws of robotics are a set of rules devised by the science fiction author Isaac Asimov. ' * 8)[:200])")
timeout 200 compute-sanitizer --tool memcheck --print-limit 5 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$P" -n 8 --temperature 0 --ctx 256 > $O/memcheck.txt 2>&1; echo "memcheck rc=$?: $(grep -E 'ERROR SUMMARY' $O/memcheck.txt)"
S="The three laws of robotics are"
timeout 60 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$S" -n 600 --temperature 0 --ctx 700 > /tmp/g.txt 2>$O/g.txt
FLEXKERN_CUDA_GRAPH=0 timeout 60 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$S" -n 600 --temperature 0 --ctx 700 > /tmp/e.txt 2>/dev/null
cmp /tmp/g.txt /tmp/e.txt && echo "graph = eager over 600 tokens ($(wc -c < /tmp/g.txt) bytes); $(grep -o 'decode:.*' $O/g.txt | cut -c1-40)"
