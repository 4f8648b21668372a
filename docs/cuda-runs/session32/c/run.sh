#!/bin/bash
# Session 32 call c: Q's loads issued before the first K/V stages queue and converted after
# (s32c) against main's kernels (s32a): bench attn --only decode and --only short, alternating,
# three rounds; 8B Q4_0 and SmolLM2 Q4_0 decode, alternating, two rounds; verify --device cuda on
# s32c.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/c; mkdir -p $O
OLD=../../../../.devcarry/s32a/flexkern; NEW=../../../../.devcarry/s32c/flexkern
date -u +%FT%TZ
p() { grep -o 'queued behind GPU work [0-9.]* ms, [0-9.]* % of copy, [0-9.]* % of read' $1 | awk '{printf "%s ", $(NF-3)}'; }
q() { grep -o 'queued behind GPU work [0-9.]* ms' $1 | awk '{printf "%s ", $(NF-1)}'; }
for r in 1 2 3; do for b in NEW OLD; do
  timeout 60 ${!b} bench attn --device cuda --only decode > $O/x.log 2>&1; echo "decode $b rc=$? queued % of read: $(p $O/x.log)"; cat $O/x.log >> $O/attn_$b.log
  timeout 60 ${!b} bench attn --device cuda --only short > $O/x.log 2>&1; echo "short $b rc=$? queued ms: $(q $O/x.log)"; cat $O/x.log >> $O/short_$b.log
done; done
date -u +%FT%TZ
for m in "llama3-8b q4_0" "smollm2-135m s"; do set -- $m
  timeout 150 $NEW synth-model --shape $1 --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/$2.gguf > /dev/null 2>&1; echo "synth $2 rc=$?"; done
S="The three laws of robotics are"
for r in 1 2; do for m in q4_0 s; do for b in NEW OLD; do
  timeout 40 ${!b} run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$m $b rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done; done
date -u +%FT%TZ
timeout 200 $NEW verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.log | cut -c1-200 | head -12
rm -f $O/out.log $O/x.log
date -u +%FT%TZ
