#!/bin/bash
# Session 33 call g: the closing binary (s33g: call f's plus verify's bad-input cases for the
# direct kernel and no pointer arithmetic on a null norm pointer). verify, memcheck on verify
# --quick, bench gemv F16 / Q8_0 / Q4_0 at 14336 and 4096 x 4096, 8B F16 and SmolLM2 F16 decode.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/g; mkdir -p $O
NEW=../../../../.devcarry/s33g/flexkern
date -u +%FT%TZ
timeout 200 $NEW verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules|bad input" $O/verify.log | cut -c1-200 | head -10
date -u +%FT%TZ
timeout 100 $NEW bench gemv --device cuda --graph --reps 20 --n 14336,4096 --k 4096 --formats f16,q8_0,q4_0 > $O/gemv.log 2>&1; echo "gemv rc=$?"; grep -E "^(copy|f16|q8_0|q4_0) " $O/gemv.log | tr -s ' ' | cut -c1-90
S="The three laws of robotics are"
for m in "llama3-8b f16" "smollm2-135m f16 sf"; do set -- $m
  timeout 150 $NEW synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/${3:-$2}.gguf > /dev/null 2>&1; echo "synth ${3:-$2} rc=$?"; done
for m in f16 sf f16 sf; do
  timeout 60 $NEW run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$m rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done
rm -f /tmp/f16.gguf /tmp/sf.gguf $O/out.log
date -u +%FT%TZ
timeout 120 compute-sanitizer --tool memcheck $NEW verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
date -u +%FT%TZ
