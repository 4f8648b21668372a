#!/bin/bash
# Session 33 call f: the closing binary (s33f: the direct kernel's RoPE epilogue removed again,
# so 8B F16 and SmolLM2 F16 take call e's FLEXKERN_CUDA_ROPE_FUSE=0 launches by default). 8B F16
# and SmolLM2 F16 decode, two runs each; verify, verify-model on SmolLM2 F16, memcheck.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/f; mkdir -p $O
NEW=../../../../.devcarry/s33f/flexkern
date -u +%FT%TZ
S="The three laws of robotics are"
for m in "llama3-8b f16" "smollm2-135m f16 sf"; do set -- $m
  timeout 150 $NEW synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/${3:-$2}.gguf > /dev/null 2>&1; echo "synth ${3:-$2} rc=$?"; done
for r in 1 2; do for m in f16 sf; do
  timeout 60 $NEW run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$m rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done
rm -f /tmp/f16.gguf
date -u +%FT%TZ
timeout 90 $NEW verify-model --device cuda --model /tmp/sf.gguf > $O/vm.txt 2>&1; echo "verify-model (SmolLM2 F16) rc=$?"; tail -1 $O/vm.txt
timeout 200 $NEW verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.log | cut -c1-200 | head -10
date -u +%FT%TZ
timeout 150 compute-sanitizer --tool memcheck $NEW verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
timeout 120 compute-sanitizer --tool memcheck $NEW run --device cuda --model /tmp/sf.gguf --prompt "$S" -n 8 --temperature 0 --ctx 64 > $O/memcheck_run.log 2>&1; echo "memcheck run (SmolLM2 F16) rc=$?"; grep -E "ERROR SUMMARY|decode:" $O/memcheck_run.log | tail -2
rm -f $O/out.log
date -u +%FT%TZ
