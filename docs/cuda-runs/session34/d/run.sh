#!/bin/bash
# Session 34 call d: the direct GEMV's fused RMSNorm with the weights' loads first (s34d: the
# unit's squares after its dots, no m branch under the norm; SASS: one round trip a unit, as
# without the norm). 8B F16 and SmolLM2 F16 decode: session 33's binary (s33g), s34d as planned
# (norm fused up to 8 MiB), s34d with the norm fused into every launch (FLEXKERN_GEMV_DNORM_MAX),
# three rounds in rotating order; then verify and memcheck on s34d.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/d; mkdir -p $O
OLD=../../../../.devcarry/s33g/flexkern; NEW=../../../../.devcarry/s34d/flexkern
date -u +%FT%TZ
S="The three laws of robotics are"
for m in "llama3-8b f16" "smollm2-135m f16 sf"; do set -- $m
  timeout 150 $NEW synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/${3:-$2}.gguf > /dev/null 2>&1 & done; wait
run() { # binary model label env...
  local b=$1 m=$2 l=$3; shift 3
  env "$@" timeout 60 ${!b} run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$m $b $l rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
}
A="OLD f16 old X=1"; B="NEW f16 planned X=1"; C="NEW f16 allnorm FLEXKERN_GEMV_DNORM_MAX=100000000000"
run $A; run $B; run $C; run $C; run $A; run $B; run $B; run $C; run $A
for r in 1 2; do run OLD sf old X=1; run NEW sf new X=1; done
date -u +%FT%TZ
timeout 200 $NEW verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules|bad input" $O/verify.log | cut -c1-200 | head -10
date -u +%FT%TZ
timeout 120 compute-sanitizer --tool memcheck $NEW verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
FLEXKERN_GEMV_DNORM_MAX=100000000000 timeout 90 $NEW verify-model --device cuda --model /tmp/sf.gguf > $O/vm.txt 2>&1; echo "verify-model (SmolLM2 F16, norm in every launch) rc=$?"; tail -1 $O/vm.txt
rm -f /tmp/f16.gguf /tmp/sf.gguf $O/out.log
date -u +%FT%TZ
