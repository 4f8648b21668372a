#!/bin/bash
# Session 28 call d: decode stages of 32 KB for heads of 64 (128-key tiles), the merge's plan
# read before its wait, the early-trigger experiment reverted; the bench's read bandwidth and
# queued figures. verify; decode bench alternating with session 27's closing binary
# (flexkern_old); fp8 paged with a 256-byte L2 prefetch; PyTorch peers (read bandwidth, queued);
# SmolLM2 and 8B Q4_0 decode alternating; memcheck on verify --quick.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s28d; mkdir -p $O
date -u +%FT%TZ
(timeout 100 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/q4_0.gguf > /dev/null 2>&1; echo "synth 8b rc=$?"; timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1; echo "synth smollm2 rc=$?") > $O/synth.log 2>&1 &
timeout 200 ./flexkern verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.log | cut -c1-200 | head -12
date -u +%FT%TZ
for r in 1 2; do for b in flexkern flexkern_old; do
  timeout 60 ./$b bench attn --device cuda --only decode > $O/a.log 2>&1
  echo "== $b round $r" >> $O/attn.log; cat $O/a.log >> $O/attn.log
  echo "$b: $(grep -E '^decode' $O/a.log | awk '{printf "%s ", $(NF-3)}')"
  echo "   queued: $(grep -E '^  decode' $O/a.log | grep -o 'queued behind GPU work [0-9.]* ms, [0-9.]* % of copy, [0-9.]* % of read' | awk '{printf "%s/%s ", $(NF-7), $(NF-3)}')"
done; done
grep -E "^copy" $O/a.log
FLEXKERN_CUDA_MMA=128,2,0,256 timeout 60 ./flexkern bench attn --device cuda --only "fp8e4m3 paged16" > $O/a.log 2>&1
echo "== fp8 paged l256" >> $O/attn.log; cat $O/a.log >> $O/attn.log
echo "fp8 paged l256: $(grep -E '^decode' $O/a.log | awk '{printf "%s ", $(NF-3)}') $(grep -o 'queued behind GPU work [0-9.]* ms, [0-9.]* %' $O/a.log)"
date -u +%FT%TZ
timeout 200 python3 attention_peers_cuda.py > $O/peers.log 2>&1; echo "peers rc=$?"; grep -E "copy|decode" $O/peers.log | cut -c1-130
date -u +%FT%TZ
wait; cat $O/synth.log
S="The three laws of robotics are"
for r in 1 2; do for m in s q4_0; do for b in flexkern flexkern_old; do
  timeout 30 ./$b run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$m $b rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done; done
date -u +%FT%TZ
timeout 220 compute-sanitizer --tool memcheck ./flexkern verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
date -u +%FT%TZ
