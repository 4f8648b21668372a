#!/bin/bash
# Session 23 call a (H200): exploration. GEMV fixed cost vs slope by size; GEMV knobs for Q4_K/Q6_K;
# decode attention pipeline sweep at B1 x 128k; the 8B Q4_0 step trace.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s23a; mkdir -p $O
date -u +%FT%TZ
G="./flexkern bench gemv --device cuda --graph --reps 20"
timeout 100 $G --formats q4_0,q8_0,q4_k,q6_k,f16 --n 4096,8192,14336,28672 --k 4096 > $O/gemv_sizes.txt 2>&1; echo "sizes rc=$?"
timeout 60 $G --formats q4_0,q8_0,q4_k,q6_k --n 4096 --k 14336 > $O/gemv_down.txt 2>&1; echo "down rc=$?"
for kn in "" FLEXKERN_GEMV_MINB=3 "FLEXKERN_GEMV_MINB=3 FLEXKERN_GEMV_FIT=3" FLEXKERN_GEMV_SUN=2 FLEXKERN_GEMV_SUN=4 FLEXKERN_GEMV_SUN=8 FLEXKERN_GEMV_BULK=2; do
  echo "== $kn" >> $O/gemv_knobs.txt
  env $kn timeout 60 $G --formats q4_k,q6_k,q4_0,q8_0 --n 14336 --k 4096 >> $O/gemv_knobs.txt 2>&1; echo "knob '$kn' rc=$?"
done
grep -E "^(==|q|f16)" $O/gemv_knobs.txt | awk '{print $1,$2,$3,$4,$6,$NF}'
date -u +%FT%TZ
for mm in "" 64,3 32,2 128,2 64,4 128,3 256,2; do
  echo "== MMA=$mm" >> $O/attn_sweep.txt
  FLEXKERN_CUDA_MMA=$mm timeout 60 ./flexkern bench attn --device cuda --only "B1 L131072" >> $O/attn_sweep.txt 2>&1; echo "mma '$mm' rc=$?"
done
grep -E "^(==|decode B1)" $O/attn_sweep.txt | cut -c1-110
date -u +%FT%TZ
timeout 120 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1; echo "synth rc=$?"
FLEXKERN_CUDA_TRACE=step timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "The three laws of robotics are" -n 64 --temperature 0 --ctx 160 > $O/trace.txt 2>&1; echo "trace rc=$?"
date -u +%FT%TZ
