#!/bin/bash
# Session 21 call e: the paged producer's page lookups batched (new) against call d's binary
# (d): verify, verify-model (SmolLM2 synth, its prompt runs the Hopper kernel on paged KV), the
# trace, alternating prefill runs.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s21e; mkdir -p $O
date -u +%FT%TZ
timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "^verify:|modules" $O/verify.txt | tail -2; grep -iE " fail" $O/verify.txt | head -5
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
timeout 120 ./flexkern verify-model --device cuda --model /tmp/s.gguf > $O/verify_model.txt 2>&1; echo "verify-model rc=$?"; tail -3 $O/verify_model.txt | cut -c1-200
FLEXKERN_CUDA_TRACE=1 timeout 200 ./flexkern bench attn --device cuda --only prefill > $O/trace.txt 2>&1; echo "trace rc=$?"
for r in 1 2; do
  timeout 150 ./flexkern_d bench attn --device cuda --only prefill > $O/d_$r.txt 2>&1; echo "d $r rc=$?"
  timeout 150 ./flexkern bench attn --device cuda --only prefill > $O/new_$r.txt 2>&1; echo "new $r rc=$?"
done
date -u +%FT%TZ
row() { grep -E "^(prefill|chunked)" $1 | awk '{n=NF; printf "%.0f|", $(n-5)/1000}'; echo; }
for f in d_1 new_1 d_2 new_2 trace; do echo "$f: $(row $O/$f.txt)"; done
grep "trace:" $O/trace.txt | tail -2 | sed 's/.*durations/durations/; s/switch gaps.*phases/phases/; s/phases.*consumer/consumer/' | cut -c1-200
