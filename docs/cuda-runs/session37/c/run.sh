#!/bin/bash
# Session 37 call c: why the 8B Q6_K decode lost 4 % on s37b while its GEMVs gained: step
# traces of both builds, the unpipelined rows (FLEXKERN_GEMV_PIPE=0) on the new layout, and
# batch sizes for the down projection (k 14336).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/c; mkdir -p $O
A=../../../../.devcarry/s37a/flexkern
B=../../../../.devcarry/s37b/flexkern
$A synth-model --shape llama3-8b --format q6_k --tokenizer bytes --vocab 49152 --out /tmp/m_q6_k.gguf > /dev/null 2>&1
R="--model /tmp/m_q6_k.gguf --prompt The_three_laws_of_robotics_are -n 40 --temperature 0 --ctx 160"
for X in A B; do eval BIN=\$$X; echo "== $X" >> $O/trace.txt
  FLEXKERN_CUDA_TRACE=step $BIN run --device cuda $R 2>&1 | grep -v synth_unused >> $O/trace.txt
done
echo "== B PIPE=0" >> $O/trace.txt
FLEXKERN_GEMV_PIPE=0 FLEXKERN_CUDA_TRACE=step $B run --device cuda $R 2>&1 | grep -v synth_unused >> $O/trace.txt
for r in 1 2; do for X in A B B0; do
  case $X in A) BIN=$A; E=X=1;; B) BIN=$B; E=X=1;; B0) BIN=$B; E=FLEXKERN_GEMV_PIPE=0;; esac
  env $E $BIN run --device cuda --model /tmp/m_q6_k.gguf --prompt "The three laws of robotics are" -n 128 --temperature 0 --ctx 160 > /tmp/o.txt 2>/tmp/e.txt
  echo "$X q6_k r$r: $(grep -v 'tok/s' /tmp/o.txt | md5sum | cut -c1-8) $(grep 'tok/s' /tmp/o.txt /tmp/e.txt | tail -1)" >> $O/decode.txt
done; done
for c in X=1 FLEXKERN_GEMV_PIPE=0 FLEXKERN_GEMV_SUN=5 FLEXKERN_GEMV_SUN=3 FLEXKERN_GEMV_SUN=2; do echo "== B $c" >> $O/bench.txt
  env $c $B bench gemv --device cuda --graph --reps 20 --n 4096 --k 14336 --formats q6_k >> $O/bench.txt 2>&1
  env $c $B bench gemv --device cuda --graph --reps 20 --n 14336,4096 --k 4096 --formats q6_k >> $O/bench.txt 2>&1
done
cat $O/decode.txt
