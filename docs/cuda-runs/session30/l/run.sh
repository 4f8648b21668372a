#!/bin/bash
# Session 30 call l: the decode attention's Q loads issued before its first stages' page lookups
# (new) against session 29's final binary (old): 8B Q4_0 and SmolLM2 Q4_0 decode, alternating,
# three rounds; bench attn --only decode, each binary; verify --device cuda (new); step traces.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/l; mkdir -p $O
NEW=../../../../.devcarry/s30l/flexkern; OLD=../../../../.devcarry/s29l/flexkern
date -u +%FT%TZ
for m in "llama3-8b q4_0" "smollm2-135m s"; do set -- $m
  timeout 150 $NEW synth-model --shape $1 --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/$2.gguf > /dev/null 2>&1; echo "synth $2 rc=$?"; done
S="The three laws of robotics are"
for r in 1 2 3; do for m in q4_0 s; do for b in NEW OLD; do
  timeout 40 ${!b} run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$m $b rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done; done
date -u +%FT%TZ
for b in NEW OLD; do
  timeout 60 ${!b} bench attn --device cuda --only decode > $O/a.log 2>&1; echo "== bench $b rc=$?"; cat $O/a.log >> $O/attn.log
  echo "   queued % of read: $(grep -o 'queued behind GPU work [0-9.]* ms, [0-9.]* % of copy, [0-9.]* % of read' $O/a.log | awk '{printf "%s ", $(NF-3)}')"
done
date -u +%FT%TZ
timeout 260 $NEW verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.log | cut -c1-200 | head -12
date -u +%FT%TZ
for b in NEW OLD; do for m in q4_0 s; do
  FLEXKERN_CUDA_TRACE=step timeout 60 ${!b} run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 40 --temperature 0 --ctx 160 > $O/out.log 2> $O/trace.log; echo "== trace $b $m rc=$?"
  grep -E "fk_attention" $O/trace.log | cut -c1-200 | head -2
  cat $O/trace.log >> $O/traces_$b.log
done; done
rm -f $O/out.log $O/trace.log $O/a.log
date -u +%FT%TZ
