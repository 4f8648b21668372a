#!/bin/bash
# Session 37 call a: the streamed GEMV's plan knobs re-swept on HEAD adf4138's build (s37a) now
# that a unit takes fewer instructions (blocks an SM, warps a block, batch units, bulk depth),
# and a step trace of the 8B Q4_0 decode.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/a; mkdir -p $O
B=../../../../.devcarry/s37a/flexkern
sweep() {
  echo "== $* $(date -u +%T)" >> $O/bench.txt
  env "$@" $B bench gemv --device cuda --graph --reps 20 --n 14336,6144,4096 --k 4096 --formats q4_0,q4_k,q6_k,q8_0 >> $O/bench.txt 2>&1
  env "$@" $B bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats q4_0,q4_k,q6_k,q8_0 >> $O/bench.txt 2>&1
}
sweep X=base
for c in "FLEXKERN_GEMV_FIT=3" "FLEXKERN_GEMV_FIT=4" "FLEXKERN_GEMV_FIT=4 FLEXKERN_GEMV_SUN=2" \
  "FLEXKERN_GEMV_FIT=4 FLEXKERN_GEMV_SUN=3" "FLEXKERN_GEMV_WARPS=16 FLEXKERN_GEMV_FIT=2" \
  "FLEXKERN_GEMV_BULK=3" "FLEXKERN_GEMV_BULK=4" X=base2 "FLEXKERN_GEMV_FIT=3 FLEXKERN_GEMV_BULK=3" \
  "FLEXKERN_GEMV_FIT=3 FLEXKERN_GEMV_BULK=2" "FLEXKERN_GEMV_FIT=4 FLEXKERN_GEMV_BULK=2" \
  "FLEXKERN_GEMV_SUN=2" "FLEXKERN_GEMV_SUN=3" "FLEXKERN_GEMV_WARPS=4 FLEXKERN_GEMV_FIT=6" \
  "FLEXKERN_GEMV_WARPS=4 FLEXKERN_GEMV_FIT=8" X=base3; do
  sweep $c
done
$B synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/m_q4_0.gguf > /dev/null 2>&1
FLEXKERN_CUDA_TRACE=step $B run --device cuda --model /tmp/m_q4_0.gguf --prompt "The three laws of robotics are" -n 40 --temperature 0 --ctx 160 > $O/trace.txt 2>&1
for r in 1 2; do
  $B run --device cuda --model /tmp/m_q4_0.gguf --prompt "The three laws of robotics are" -n 128 --temperature 0 --ctx 160 > /tmp/o.txt 2>/tmp/e.txt
  echo "q4_0 r$r: $(grep -v 'tok/s' /tmp/o.txt | md5sum | cut -c1-8) $(grep 'tok/s' /tmp/o.txt /tmp/e.txt | tail -1)" >> $O/decode.txt
done
