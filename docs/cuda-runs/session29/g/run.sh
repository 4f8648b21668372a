#!/bin/bash
# Session 29 call g: decode's per-warp pipeline (each warp queues and waits for only its own
# keys of a stage; no block barrier a tile), with the 128-byte L2 rule. verify; memcheck on
# verify --quick; decode bench alternating with call e's binary at FLEXKERN_CUDA_MMA_L2=128;
# 8B Q4_0 step traces and decode rounds of both.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/g; mkdir -p $O
D=../../../../.devcarry/s29g
date -u +%FT%TZ
(timeout 120 $D/flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/q4_0.gguf > /dev/null 2>&1; echo "synth 8b rc=$?") > $O/synth.log 2>&1 &
timeout 200 $D/flexkern verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.log | cut -c1-200 | head -12
timeout 120 compute-sanitizer --tool memcheck $D/flexkern verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
date -u +%FT%TZ
for r in 1 2 3; do for b in flexkern flexkern_e; do
  FLEXKERN_CUDA_MMA_L2=128 timeout 60 $D/$b bench attn --device cuda --only decode > $O/a.log 2>&1
  echo "== $b round $r" >> $O/attn.log; cat $O/a.log >> $O/attn.log
  echo "$b: $(grep -E '^decode' $O/a.log | awk '{printf "%s ", $(NF-3)}')"
  echo "   queued % of read: $(grep -o 'queued behind GPU work [0-9.]* ms, [0-9.]* % of copy, [0-9.]* % of read' $O/a.log | awk '{printf "%s ", $(NF-3)}')"
done; done
rm -f $O/a.log
FLEXKERN_CUDA_TRACE=1 timeout 60 $D/flexkern bench attn --device cuda --only L131072 > $O/trace.log 2>&1
grep -E "trace:" $O/trace.log | sed 's/switch gaps[^|]*|//' | cut -c1-400
date -u +%FT%TZ
wait; cat $O/synth.log
S="The three laws of robotics are"
for b in flexkern flexkern_e; do
  FLEXKERN_CUDA_MMA_L2=128 FLEXKERN_CUDA_TRACE=step timeout 60 $D/$b run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 40 --temperature 0 --ctx 160 > $O/out.log 2> $O/tr.log; echo "trace $b rc=$?"
  grep -E "fk_attention|step trace: [0-9]" $O/tr.log | cut -c1-170 | head -3
  cat $O/tr.log >> $O/traces.log
done
for r in 1 2; do for b in flexkern flexkern_e; do
  FLEXKERN_CUDA_MMA_L2=128 timeout 30 $D/$b run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "q4_0 $b rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done
rm -f $O/out.log $O/tr.log
date -u +%FT%TZ
