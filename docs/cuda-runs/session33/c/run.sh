#!/bin/bash
# Session 33 call c: the direct kernel normalizes x only for launches of at most 8 MiB of
# weights (DNORM_MAX_BYTES; 8B F16 runs a norm launch first again), and its stacked Q, K, V
# takes RoPE and the KV append in the epilogue with or without the norm (s33c); call a's
# binary without its prefetch (s33a: PDL and the stacked Q, K, V) and session 32's closing
# binary (s32i). 8B F16 and SmolLM2 F16 decode alternating, two rounds (s33c also with
# FLEXKERN_CUDA_ROPE_FUSE=0, and SmolLM2 with FLEXKERN_GEMV_DNORM_MAX=0); 8B Q4_0 once each;
# the F16 step trace; verify; verify-model on SmolLM2 F16; memcheck.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/c; mkdir -p $O
OLD=../../../../.devcarry/s32i/flexkern; MID=../../../../.devcarry/s33a/flexkern; NEW=../../../../.devcarry/s33c/flexkern
date -u +%FT%TZ
S="The three laws of robotics are"
for m in "llama3-8b f16" "smollm2-135m f16 sf" "llama3-8b q4_0"; do set -- $m
  timeout 150 $NEW synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/${3:-$2}.gguf > /dev/null 2>&1; echo "synth ${3:-$2} rc=$?"; done
date -u +%FT%TZ
run() { # binary model rope-fuse dnorm-max label
  FLEXKERN_GEMV_PREFETCH=0 FLEXKERN_CUDA_ROPE_FUSE=$3 FLEXKERN_GEMV_DNORM_MAX=$4 timeout 60 ${!1} run --device cuda --model /tmp/$2.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$2 $1 $5 rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
}
for r in 1 2; do
  run OLD f16 1 8388608 ""; run MID f16 1 8388608 ""; run NEW f16 1 8388608 default; run NEW f16 0 8388608 ropefuse0
done
for r in 1 2; do
  run OLD sf 1 8388608 ""; run MID sf 1 8388608 ""; run NEW sf 1 8388608 default; run NEW sf 1 0 dnorm0
done
run OLD q4_0 1 8388608 ""; run NEW q4_0 1 8388608 default
date -u +%FT%TZ
FLEXKERN_CUDA_TRACE=step timeout 60 $NEW run --device cuda --model /tmp/f16.gguf --prompt "$S" -n 40 --temperature 0 --ctx 160 > $O/out.log 2> $O/trace.log; echo "== trace f16 rc=$?"
grep -E "fk_|replay [0-9]*:" $O/trace.log | cut -c1-200 | head -12
rm -f /tmp/f16.gguf /tmp/q4_0.gguf
date -u +%FT%TZ
timeout 90 $NEW verify-model --device cuda --model /tmp/sf.gguf > $O/vm.txt 2>&1; echo "verify-model (SmolLM2 F16) rc=$?"; tail -1 $O/vm.txt
timeout 200 $NEW verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules|norm_qkv_rope|stacked q/k/v (f16|bf16|f32)|(f16|bf16|f32|mlx).*rmsnorm" $O/verify.log | cut -c1-200 | head -30
date -u +%FT%TZ
timeout 150 compute-sanitizer --tool memcheck $NEW verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
timeout 120 compute-sanitizer --tool memcheck $NEW run --device cuda --model /tmp/sf.gguf --prompt "$S" -n 8 --temperature 0 --ctx 64 > $O/memcheck_run.log 2>&1; echo "memcheck run (SmolLM2 F16) rc=$?"; grep -E "ERROR SUMMARY|decode:" $O/memcheck_run.log | tail -2
rm -f $O/out.log
date -u +%FT%TZ
