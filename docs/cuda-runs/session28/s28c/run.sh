#!/bin/bash
# Session 28 call c (call b's binaries): the 8B Q4_0 step's timeline with and without the
# attention kernel's early dependent launch (FLEXKERN_CUDA_TRACE=step), decode rounds; the
# SmolLM2 D64 decode's pipeline knobs; the B1 x 128k block timeline (merge start).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s28c; mkdir -p $O
date -u +%FT%TZ
(timeout 100 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/q4_0.gguf > /dev/null 2>&1; echo "synth rc=$?") > $O/synth.log 2>&1 &
for mma in "" 128,2 64,3 128,3; do
  env ${mma:+FLEXKERN_CUDA_MMA=$mma} timeout 60 ./flexkern bench attn --device cuda --only "Hq9/Hkv3" > $O/a.log 2>&1
  echo "== MMA $mma" >> $O/knobs.log; cat $O/a.log >> $O/knobs.log
  echo "MMA [$mma]: $(grep -E '^decode' $O/a.log | awk '{printf "%s ", $(NF-3)}') queued $(grep -E '^  decode' $O/a.log | grep -o 'queued behind GPU work [0-9.]* ms, [0-9.]* %' | awk '{printf "%s ", $(NF-1)}')"
done
for c in "L131072 Hq32/Hkv8 D128 bf16 contiguous" "L131072 Hq32/Hkv8 D128 fp8e4m3 contiguous"; do
  FLEXKERN_CUDA_TRACE=1 timeout 60 ./flexkern bench attn --device cuda --only "$c" > $O/t.log 2>&1
  echo "== trace $c" >> $O/knobs.log; cat $O/t.log >> $O/knobs.log
  echo "$c: $(grep -E 'trace:' $O/t.log | grep -o 'ends p10.*')"
done
date -u +%FT%TZ
wait; cat $O/synth.log
S="The three laws of robotics are"
for b in flexkern flexkern_old; do
  FLEXKERN_CUDA_TRACE=step timeout 60 ./$b run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 40 --temperature 0 --ctx 160 > $O/out.log 2> $O/trace_$b.log; echo "trace $b rc=$?"
  grep -E "after|step trace: [0-9]" $O/trace_$b.log | cut -c1-170 | head -8
done
for r in 1 2 3; do for b in flexkern flexkern_old; do
  timeout 30 ./$b run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "q4_0 $b rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done
date -u +%FT%TZ
