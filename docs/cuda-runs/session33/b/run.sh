#!/bin/bash
# Session 33 call b: RMSNorm fused into the direct GEMV (FK_DNORM: the plain float formats'
# Q, K, V and gate/up normalize x themselves, no norm launch) and RoPE + the KV append in the
# stacked Q, K, V's epilogue (FK_SROPE; FLEXKERN_CUDA_ROPE_FUSE=0 without), on top of call a's
# PDL and stacked Q, K, V (s33b), against call a's binary without its prefetch (s33a, FLEXKERN_GEMV_PREFETCH=0)
# and session 32's closing binary (s32i). 8B F16 decode alternating, two rounds, with s33b's
# per-lane prefetch variants (L2 2048, L1 2048 bytes a row); SmolLM2 F16; F16 GEMV bench; the
# F16 step trace; verify; verify-model on SmolLM2 F16; memcheck.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/b; mkdir -p $O
OLD=../../../../.devcarry/s32i/flexkern; MID=../../../../.devcarry/s33a/flexkern; NEW=../../../../.devcarry/s33b/flexkern
date -u +%FT%TZ
S="The three laws of robotics are"
for m in "llama3-8b f16" "smollm2-135m f16 sf"; do set -- $m
  timeout 150 $NEW synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/${3:-$2}.gguf > /dev/null 2>&1; echo "synth ${3:-$2} rc=$?"; done
date -u +%FT%TZ
for r in 1 2; do for v in "OLD 0 1" "MID 0 1" "NEW 0 1" "NEW 0 0" "NEW 2048 1" "NEW l1:2048 1"; do set -- $v
  FLEXKERN_CUDA_ROPE_FUSE=$3 FLEXKERN_GEMV_PREFETCH=$2 timeout 60 ${!1} run --device cuda --model /tmp/f16.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "f16 $1 pf$2 ropefuse$3 rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done
for r in 1 2; do for v in OLD MID NEW; do
  FLEXKERN_GEMV_PREFETCH=0 timeout 60 ${!v} run --device cuda --model /tmp/sf.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "smollm2-f16 $v rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done
date -u +%FT%TZ
for b in OLD NEW; do for n in 4096 14336; do
  timeout 60 ${!b} bench gemv --device cuda --graph --reps 20 --n $n --k 4096 --formats f16 > $O/gemv_${b}_$n.log 2>&1; echo "gemv $b $n: $(grep -E '^f16' $O/gemv_${b}_$n.log | tr -s ' ' | cut -d' ' -f4-8)"
done; done
FLEXKERN_CUDA_TRACE=step timeout 60 $NEW run --device cuda --model /tmp/f16.gguf --prompt "$S" -n 40 --temperature 0 --ctx 160 > $O/out.log 2> $O/trace.log; echo "== trace f16 rc=$?"
grep -E "fk_|replay [0-9]*:" $O/trace.log | cut -c1-200 | head -12
rm -f /tmp/f16.gguf
date -u +%FT%TZ
timeout 90 $NEW verify-model --device cuda --model /tmp/sf.gguf > $O/vm.txt 2>&1; echo "verify-model (SmolLM2 F16) rc=$?"; head -1 $O/vm.txt | cut -c1-150; tail -3 $O/vm.txt
timeout 200 $NEW verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules|norm_qkv_rope|stacked q/k/v (f16|bf16|f32)|(f16|bf16|f32|mlx).*rmsnorm" $O/verify.log | cut -c1-200 | head -30
date -u +%FT%TZ
timeout 150 compute-sanitizer --tool memcheck $NEW verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
timeout 120 compute-sanitizer --tool memcheck $NEW run --device cuda --model /tmp/sf.gguf --prompt "$S" -n 8 --temperature 0 --ctx 64 > $O/memcheck_run.log 2>&1; echo "memcheck run (SmolLM2 F16) rc=$?"; grep -E "ERROR SUMMARY|decode:" $O/memcheck_run.log | tail -2
rm -f $O/out.log
date -u +%FT%TZ
