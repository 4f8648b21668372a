#!/bin/bash
# Session 31 call c: decode blocks alone on their SMs queue three stages (lone_decode_shape,
# s31c) against main (s31a). bench attn --only short (new: 1024 and 2048 keys, SmolLM2 at 160)
# with the rule and with the pipeline pinned (FLEXKERN_CUDA_MMA=64,2 = the old plan for the 8B
# heads, 128,2 for SmolLM2's, 64,4), three rounds; 8B Q4_0 and SmolLM2 Q4_0 decode, both
# binaries alternating, three rounds; bench attn --only decode and verify --device cuda (s31c).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/c; mkdir -p $O
MAIN=../../../../.devcarry/s31a/flexkern; NEW=../../../../.devcarry/s31c/flexkern
date -u +%FT%TZ
for m in "llama3-8b q4_0" "smollm2-135m s"; do set -- $m
  timeout 150 $NEW synth-model --shape $1 --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/$2.gguf > /dev/null 2>&1; echo "synth $2 rc=$?"; done
date -u +%FT%TZ
q() { grep -o 'x[0-9]c0l[0-9]*b1 ([0-9]* blocks\|queued behind GPU work [0-9.]* ms' $1 | awk '/blocks/{printf "%s/%s ", substr($1,2,1), $2} /ms/{printf "%s | ", $(NF-1)}'; }
for r in 1 2 3; do
  for v in - 64,2 128,2 64,4; do
    if [ $v = - ]; then E=""; else E="FLEXKERN_CUDA_MMA=$v"; fi
    env $E timeout 60 $NEW bench attn --device cuda --only short > $O/s.log 2>&1; echo "short $v rc=$? $(q $O/s.log)"; cat $O/s.log >> $O/short.log
  done
done
date -u +%FT%TZ
S="The three laws of robotics are"
for r in 1 2 3; do for m in q4_0 s; do for b in NEW MAIN; do
  timeout 40 ${!b} run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$m $b rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done; done
date -u +%FT%TZ
timeout 60 $NEW bench attn --device cuda --only decode > $O/attn.log 2>&1; echo "== bench decode rc=$?"
echo "   queued % of read: $(grep -o 'queued behind GPU work [0-9.]* ms, [0-9.]* % of copy, [0-9.]* % of read' $O/attn.log | awk '{printf "%s ", $(NF-3)}')"
grep -o "mma1x[0-9]*x[0-9]" $O/attn.log | sort | uniq -c
date -u +%FT%TZ
timeout 200 $NEW verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.log | cut -c1-200 | head -12
rm -f $O/out.log $O/s.log
date -u +%FT%TZ
