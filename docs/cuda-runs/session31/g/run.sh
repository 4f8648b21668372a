#!/bin/bash
# Session 31 call g: the closing binary (s31g: call f's page window for long paged decode
# partitions, with pages of other sizes compiling again). verify --device cuda as planned and
# with the window on every paged decode (FLEXKERN_CUDA_PAGE_WINDOW=0); memcheck on verify
# --quick with it on; bench attn --only decode against main's kernels (s31b), alternating, two
# rounds; 8B Q4_0 and SmolLM2 Q4_0 decode.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/g; mkdir -p $O
OLD=../../../../.devcarry/s31b/flexkern; NEW=../../../../.devcarry/s31g/flexkern
date -u +%FT%TZ
timeout 200 $NEW verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.log | cut -c1-200 | head -12
FLEXKERN_CUDA_PAGE_WINDOW=0 timeout 200 $NEW verify --device cuda > $O/verify_window.log 2>&1; echo "verify (window on every paged decode) rc=$?"
grep -E "FAIL|^verify|modules" $O/verify_window.log | cut -c1-200 | head -12
date -u +%FT%TZ
FLEXKERN_CUDA_PAGE_WINDOW=0 timeout 150 compute-sanitizer --tool memcheck $NEW verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck (window on) rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
date -u +%FT%TZ
for r in 1 2; do for b in NEW OLD; do
  timeout 60 ${!b} bench attn --device cuda --only decode > $O/a.log 2>&1; echo "decode $b rc=$? queued % of read: $(grep -o 'queued behind GPU work [0-9.]* ms, [0-9.]* % of copy, [0-9.]* % of read' $O/a.log | awk '{printf "%s ", $(NF-3)}')"; cat $O/a.log >> $O/attn_$b.log
done; done
for m in "llama3-8b q4_0" "smollm2-135m s"; do set -- $m
  timeout 150 $NEW synth-model --shape $1 --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/$2.gguf > /dev/null 2>&1; echo "synth $2 rc=$?"; done
S="The three laws of robotics are"
for m in q4_0 s; do
  timeout 40 $NEW run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$m NEW rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done
rm -f $O/out.log $O/a.log
date -u +%FT%TZ
