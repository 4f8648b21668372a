#!/bin/bash
# Session 21 call k, the final code (06f3a62: RopeKv bundles the RoPE + KV write arguments):
# verify, verify-model and a greedy run of SmolLM2 (the fused QKV + RoPE + append path), and
# the prefill bench.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s21k; mkdir -p $O
date -u +%FT%TZ
timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "^verify:|modules" $O/verify.txt | tail -2; grep -iE " fail" $O/verify.txt | head -5; grep -E "norm_qkv_rope|rope_kv_write" $O/verify.txt | head -6 | cut -c1-120
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
timeout 120 ./flexkern verify-model --device cuda --model /tmp/s.gguf > $O/verify_model.txt 2>&1; echo "verify-model rc=$?"; tail -1 $O/verify_model.txt | cut -c1-200
timeout 60 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "The three laws of robotics are" -n 128 --temperature 0 --ctx 160 > $O/run.txt 2>&1; echo "run rc=$?"; tail -1 $O/run.txt | cut -c1-200
timeout 100 ./flexkern bench attn --device cuda --only prefill > $O/prefill.txt 2>&1; echo "prefill rc=$?"
date -u +%FT%TZ
row() { grep -E "^(prefill|chunked)" $1 | awk '{n=NF; printf "%.0f|", $(n-5)/1000}'; echo; }
echo "prefill: $(row $O/prefill.txt)"
