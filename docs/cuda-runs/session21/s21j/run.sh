#!/bin/bash
# Session 21 call j: verify on the final code (fk_rope through fk_rope_pair), verify-model
# (SmolLM2 synth: its RoPE on the GPU), and a greedy decode run.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s21j; mkdir -p $O
date -u +%FT%TZ
timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "^verify:|modules" $O/verify.txt | tail -2; grep -iE " fail" $O/verify.txt | head -5; grep -iE "rope" $O/verify.txt | head -6 | cut -c1-140
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
timeout 120 ./flexkern verify-model --device cuda --model /tmp/s.gguf > $O/verify_model.txt 2>&1; echo "verify-model rc=$?"; tail -1 $O/verify_model.txt | cut -c1-200
timeout 60 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "The three laws of robotics are" -n 128 --temperature 0 --ctx 160 > $O/run.txt 2>&1; echo "run rc=$?"; tail -2 $O/run.txt | cut -c1-200
date -u +%FT%TZ
