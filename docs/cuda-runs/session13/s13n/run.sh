#!/bin/bash
# Session 13 call n (H100): the final binary (TMA descriptors from one builder): verify,
# verify-model default path, the prefill causal / non-causal rows, an 8B F16 prompt.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s13n; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 240 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -12; tail -2 $O/verify.txt
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
timeout 60 ./flexkern verify-model --device cuda --gpu-path default --model /tmp/s.gguf --tokens 64 > $O/vm.txt 2>&1; echo "verify-model default rc=$?: $(tail -1 $O/vm.txt)"
timeout 120 ./flexkern bench attn --device cuda --only prefill > $O/prefill.txt 2>&1; grep -E "^prefill B2.*(causal|non-causal) " $O/prefill.txt | cut -c1-80
P=$(python3 -c "print(('The three laws of robotics are a set of rules devised by the science fiction author Isaac Asimov. ' * 8)[:511])")
timeout 150 ./flexkern synth-model --shape llama3-8b --format f16 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$P" -n 4 --temperature 0 --ctx 600 >/dev/null 2>&1
for i in 1 2; do timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$P" -n 32 --temperature 0 --ctx 600 2>$O/r.txt >/dev/null; echo "8b f16 $(grep -h -o 'prefill.*' $O/r.txt | tail -1 | cut -c1-80)"; done
