#!/bin/bash
# Session 33 call a: the direct GEMV under programmatic dependent launch with an L2 prefetch of
# each warp's rows before its wait, and Q, K, V of the plain float formats as one direct launch
# (s33a) against session 32's closing binary (s32i). 8B F16 decode with the prefetch at 0
# (PDL alone), 4096 (default), 8192 and 16384 bytes a row, alternating, two rounds; F16 GEMV
# bench; the F16 step trace; verify; memcheck on verify --quick and a short SmolLM2 F16 run.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/a; mkdir -p $O
OLD=../../../../.devcarry/s32i/flexkern; NEW=../../../../.devcarry/s33a/flexkern
date -u +%FT%TZ
S="The three laws of robotics are"
for m in "llama3-8b f16" "smollm2-135m f16 sf"; do set -- $m
  timeout 150 $NEW synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/${3:-$2}.gguf > /dev/null 2>&1; echo "synth ${3:-$2} rc=$?"; done
date -u +%FT%TZ
for r in 1 2; do for v in "OLD 4096" "NEW 0" "NEW 4096" "NEW 8192" "NEW 16384"; do set -- $v
  FLEXKERN_GEMV_PREFETCH=$2 timeout 60 ${!1} run --device cuda --model /tmp/f16.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "f16 $1 pf$2 rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done
for r in 1 2; do for v in "OLD 4096" "NEW 4096"; do set -- $v
  FLEXKERN_GEMV_PREFETCH=$2 timeout 60 ${!1} run --device cuda --model /tmp/sf.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "smollm2-f16 $1 rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
done; done
date -u +%FT%TZ
for b in OLD NEW; do for n in 4096 14336; do
  timeout 60 ${!b} bench gemv --device cuda --graph --reps 20 --n $n --k 4096 --formats f16 > $O/gemv_${b}_$n.log 2>&1; echo "gemv $b $n: $(grep -E '^f16' $O/gemv_${b}_$n.log | tr -s ' ' | cut -d' ' -f4-8)"
done; done
FLEXKERN_CUDA_TRACE=step timeout 60 $NEW run --device cuda --model /tmp/f16.gguf --prompt "$S" -n 40 --temperature 0 --ctx 160 > $O/out.log 2> $O/trace.log; echo "== trace f16 rc=$?"
grep -E "fk_|replay [0-9]*:" $O/trace.log | cut -c1-200 | head -12
rm -f /tmp/f16.gguf
date -u +%FT%TZ
timeout 200 $NEW verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules|stacked q/k/v" $O/verify.log | cut -c1-200 | head -30
date -u +%FT%TZ
timeout 150 compute-sanitizer --tool memcheck $NEW verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
timeout 120 compute-sanitizer --tool memcheck $NEW run --device cuda --model /tmp/sf.gguf --prompt "$S" -n 8 --temperature 0 --ctx 64 > $O/memcheck_run.log 2>&1; echo "memcheck run (SmolLM2 F16) rc=$?"; grep -E "ERROR SUMMARY|decode:" $O/memcheck_run.log | tail -2
rm -f $O/out.log
date -u +%FT%TZ
