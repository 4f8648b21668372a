#!/bin/bash
# Session 21 call c: FlashAttention-3's intra-warpgroup overlap in the Hopper prefill
# (FLEXKERN_CUDA_WG_OVERLAP, default on) against it off and against HEAD (old): verify, the
# trace, and alternating prefill runs.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s21c; mkdir -p $O
date -u +%FT%TZ
timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "^verify:|modules" $O/verify.txt | tail -2; grep -iE " fail" $O/verify.txt | head -5
FLEXKERN_CUDA_TRACE=1 timeout 200 ./flexkern bench attn --device cuda --only prefill > $O/trace.txt 2>&1; echo "trace rc=$?"
for r in 1 2; do
  timeout 150 ./flexkern_old bench attn --device cuda --only prefill > $O/old_$r.txt 2>&1; echo "old $r rc=$?"
  timeout 150 ./flexkern bench attn --device cuda --only prefill > $O/ovl_$r.txt 2>&1; echo "ovl $r rc=$?"
  FLEXKERN_CUDA_WG_OVERLAP=0 timeout 150 ./flexkern bench attn --device cuda --only prefill > $O/plain_$r.txt 2>&1; echo "plain $r rc=$?"
done
date -u +%FT%TZ
row() { grep -E "^(prefill|chunked)" $1 | awk '{n=NF; printf "%.0f|", $(n-5)/1000}'; echo; }
for f in old_1 ovl_1 plain_1 old_2 ovl_2 plain_2 trace; do echo "$f: $(row $O/$f.txt)"; done
grep -E "^  (prefill|chunked)" $O/ovl_1.txt | sed 's/.*: attn_/attn_/; s/(2048 blocks, //; s/ planned.*//' | cut -c1-90
grep "trace:" $O/trace.txt | sed 's/.*durations/durations/; s/switch gaps.*phases/phases/' | cut -c1-330
