#!/bin/bash
# Session 19 call b (H100): the merge's loads batched, the merge launched with programmatic
# dependent launch, and long splits ending in short parts launched last (plan/tail.rs).
# verify; decode bench old/new alternating; the merge change alone (TAIL=0); block timelines
# for several tail shares; a SmolLM2 verify-model with a ~2000-token prompt (decode merges
# inside the CUDA graph).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s19b; mkdir -p $O
OLD=../s19a/flexkern
date -u +%FT%TZ
timeout 150 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"; grep -E "^verify:|modules|FAIL" $O/verify.txt | tail -4
for i in 1 2; do
  timeout 60 $OLD bench attn --device cuda --only decode > $O/old$i.txt 2>&1; echo "old$i rc=$?"
  timeout 60 ./flexkern bench attn --device cuda --only decode > $O/new$i.txt 2>&1; echo "new$i rc=$?"
done
FLEXKERN_CUDA_TAIL=0 timeout 60 ./flexkern bench attn --device cuda --only decode > $O/notail.txt 2>&1; echo "notail rc=$?"
FLEXKERN_CUDA_TRACE=1 timeout 60 ./flexkern bench attn --device cuda --only decode > $O/trace_new.txt 2>&1; echo "trace rc=$?"
for t in 20,8 40,8 30,4 30,16; do
  FLEXKERN_CUDA_TAIL=$t FLEXKERN_CUDA_TRACE=1 timeout 40 ./flexkern bench attn --device cuda --only B1 > $O/tail_$t.txt 2>&1; echo "tail $t rc=$?"
done
for f in old1 new1 old2 new2 notail; do echo "== $f"; grep -E "^decode" $O/$f.txt | awk '{print $2, $3, $7, $8, $(NF-3), $(NF-2)}'; done
for f in trace_new tail_20,8 tail_40,8 tail_30,4 tail_30,16; do echo "== $f"; grep -E "trace:|kernels of the prepared" $O/$f.txt | grep -E "B1 |trace" | sed -E 's/.*(blocks, partitions)/\1/' | cut -c1-330; done
P=$(python3 -c "print(' '.join(['the quick brown fox jumps over the lazy dog']*45))")
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_k_m --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
timeout 150 ./flexkern verify-model --device cuda --gpu-path default --model /tmp/s.gguf --prompt "$P" --tokens 16 > $O/vm_long.txt 2>&1; echo "verify-model long rc=$?"; tail -3 $O/vm_long.txt
date -u +%FT%TZ
