#!/bin/bash
# Session 32 call g: the closing binary (s32f, HEAD's GPU code): bench attn --only decode twice
# beside the PyTorch peers (SDPA cuDNN / flash, FlexAttention) in the same call; 8B decode on
# the H200 for F16 and Q8_0 (not measured on this card before for F16) beside Q4_0.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/g; mkdir -p $O
R=../../../..; B=$R/.devcarry/s32f/flexkern
date -u +%FT%TZ
p() { grep -o 'queued behind GPU work [0-9.]* ms, [0-9.]* % of copy, [0-9.]* % of read' $1 | awk '{printf "%s ", $(NF-3)}'; }
timeout 60 $B bench attn --device cuda --only decode > $O/bench1.txt 2>&1; echo "bench rc=$? queued % of read: $(p $O/bench1.txt)"
PYTHONUNBUFFERED=1 timeout 120 python3 $R/bench/attention_peers_cuda.py > $O/peers.txt 2>&1; echo "peers rc=$?"
grep -E "copy|read|decode" $O/peers.txt | cut -c1-160 | head -24
timeout 60 $B bench attn --device cuda --only decode > $O/bench2.txt 2>&1; echo "bench rc=$? queued % of read: $(p $O/bench2.txt)"
grep -E "^copy|^read" $O/bench1.txt $O/bench2.txt | cut -c1-200
grep -o 'queued behind GPU work [0-9.]* ms, [0-9.]* % of copy, [0-9.]* % of read' $O/bench1.txt $O/bench2.txt
date -u +%FT%TZ
S="The three laws of robotics are"
for f in q4_0 q8_0 f16; do
  timeout 150 $B synth-model --shape llama3-8b --format $f --tokenizer bytes --vocab 49152 --out /tmp/$f.gguf > /dev/null 2>&1; echo "synth $f rc=$? $(stat -c %s /tmp/$f.gguf) bytes"
  for r in 1 2; do
    timeout 60 $B run --device cuda --model /tmp/$f.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$f rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
  done
  rm -f /tmp/$f.gguf
done
rm -f $O/out.log
date -u +%FT%TZ
