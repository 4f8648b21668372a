#!/bin/bash
# Session 28 call b: the decode attention kernel lets its dependent launch at once
# (griddepcontrol.launch_dependents), and the merge reads its plan before its wait; the bench's
# new "queued" figure (each call behind 100 us of GPU work). verify; decode bench alternating
# with session 27's closing binary (flexkern_old); PyTorch peers with the same two timings;
# 8B Q4_0 decode alternating.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s28b; mkdir -p $O
date -u +%FT%TZ
(timeout 100 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/q4_0.gguf > /dev/null 2>&1; echo "synth rc=$?") > $O/synth.log 2>&1 &
timeout 200 ./flexkern verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.log | cut -c1-200 | head -12
date -u +%FT%TZ
for r in 1 2; do for b in flexkern flexkern_old; do
  timeout 60 ./$b bench attn --device cuda --only decode > $O/a.log 2>&1
  echo "== $b round $r" >> $O/attn.log; cat $O/a.log >> $O/attn.log
  echo "$b: $(grep -E '^decode' $O/a.log | awk '{printf "%s ", $(NF-3)}')"
  echo "   queued: $(grep -E '^  decode' $O/a.log | grep -o 'queued behind GPU work [0-9.]* ms, [0-9.]* %' | awk '{printf "%s ", $(NF-1)}')"
done; done
date -u +%FT%TZ
timeout 240 python3 attention_peers_cuda.py > $O/peers.log 2>&1; echo "peers rc=$?"; grep -E "copy|decode" $O/peers.log | cut -c1-120
date -u +%FT%TZ
wait; cat $O/synth.log
S="The three laws of robotics are"
for r in 1 2; do for b in flexkern flexkern_old; do
  timeout 30 ./$b run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "q4_0 $b rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done
date -u +%FT%TZ
