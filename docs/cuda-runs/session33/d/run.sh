#!/bin/bash
# Session 33 call d: the closing binary (s33d; the stacked Q, K, V's SASS as call a's again)
# against call a's (s33a, PDL and the stacked Q, K, V, FLEXKERN_GEMV_PREFETCH=0) and session
# 32's closing binary (s32i). 8B F16 three rounds, each in another order (s33d also with
# FLEXKERN_CUDA_ROPE_FUSE=0); 8B Q4_0 and Q8_0 and SmolLM2 F16 two rounds; bench gemv for
# issue 14's formats at 14336 and 4096 x 4096 with cuBLAS f16 beside it; verify, verify-model
# on SmolLM2 F16, memcheck.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/d; mkdir -p $O
OLD=../../../../.devcarry/s32i/flexkern; MID=../../../../.devcarry/s33a/flexkern; NEW=../../../../.devcarry/s33d/flexkern
date -u +%FT%TZ
S="The three laws of robotics are"
for m in "llama3-8b f16" "smollm2-135m f16 sf" "llama3-8b q4_0" "llama3-8b q8_0"; do set -- $m
  timeout 150 $NEW synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/${3:-$2}.gguf > /dev/null 2>&1; echo "synth ${3:-$2} rc=$?"; done
date -u +%FT%TZ
run() { # binary model rope-fuse label
  FLEXKERN_GEMV_PREFETCH=0 FLEXKERN_CUDA_ROPE_FUSE=$3 timeout 60 ${!1} run --device cuda --model /tmp/$2.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.log 2>> $O/runs.log; echo "$2 $1 $4 rc=$? $(tail -c 300 $O/runs.log | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.log | cut -c1-8)"
}
run OLD f16 1 ""
run MID f16 1 ""; run NEW f16 1 default; run NEW f16 0 ropefuse0
run NEW f16 1 default; run NEW f16 0 ropefuse0; run MID f16 1 ""
run NEW f16 0 ropefuse0; run MID f16 1 ""; run NEW f16 1 default
for r in 1 2; do for m in sf q4_0 q8_0; do run OLD $m 1 ""; run NEW $m 1 default; done; done
date -u +%FT%TZ
timeout 120 $NEW bench gemv --device cuda --graph --reps 20 --n 14336,4096 --k 4096 --formats f16,q8_0,q4_0,q4_k,q6_k > $O/gemv.log 2>&1; echo "gemv rc=$?"; grep -E "^(copy|f16|q8_0|q4_0|q4_k|q6_k) " $O/gemv.log | tr -s ' ' | cut -c1-90
PYTHONUNBUFFERED=1 timeout 120 python3 ../../../../bench/gemv_peers_cuda.py --graph > $O/gemv_peers.log 2>&1; echo "peers rc=$?"; tail -8 $O/gemv_peers.log
rm -f /tmp/f16.gguf /tmp/q4_0.gguf /tmp/q8_0.gguf
date -u +%FT%TZ
timeout 90 $NEW verify-model --device cuda --model /tmp/sf.gguf > $O/vm.txt 2>&1; echo "verify-model (SmolLM2 F16) rc=$?"; tail -1 $O/vm.txt
timeout 200 $NEW verify --device cuda > $O/verify.log 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.log | cut -c1-200 | head -10
date -u +%FT%TZ
timeout 150 compute-sanitizer --tool memcheck $NEW verify --device cuda --quick > $O/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.log | tail -3
timeout 120 compute-sanitizer --tool memcheck $NEW run --device cuda --model /tmp/sf.gguf --prompt "$S" -n 8 --temperature 0 --ctx 64 > $O/memcheck_run.log 2>&1; echo "memcheck run (SmolLM2 F16) rc=$?"; grep -E "ERROR SUMMARY|decode:" $O/memcheck_run.log | tail -2
rm -f $O/out.log
date -u +%FT%TZ
