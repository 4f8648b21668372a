#!/bin/bash
# Session 38 call d: where the streamed GEMV's activation prologue spends its time. The trace
# build stamps thread 0 of every block at the wait's return (step), at the prologue's points
# (step,at=1: activations loaded; at=2: the norm's sum reduced; at=3: codes stored) and after
# the block's barrier (step,prologue), s38d (04b8b6c + the trace points).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/d; mkdir -p $O
B=../../../../.devcarry/s38d/flexkern
$B synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/m_q4_0.gguf > /dev/null 2>&1
for t in step step,at=1 step,at=2 step,at=3 step,prologue; do
  echo "== $t" >> $O/bench.txt
  for s in "--n 4096 --k 4096" "--n 14336 --k 4096" "--n 4096 --k 14336"; do
    FLEXKERN_CUDA_TRACE=$t $B bench gemv --device cuda --graph --reps 20 $s --formats q4_0 >> $O/bench.txt 2>&1
  done
  echo "== $t" >> $O/trace.txt
  FLEXKERN_CUDA_TRACE=$t $B run --device cuda --model /tmp/m_q4_0.gguf --prompt "The three laws of robotics are" -n 40 --temperature 0 --ctx 160 2>&1 | grep -a "fk_gemv\|fk_attention\|replay 32" | sed 's/.*replay 32/replay 32/' >> $O/trace.txt
done
cat $O/trace.txt | cut -c1-220
grep -a "^== \|released\|q4_0 " $O/bench.txt | cut -c1-200 | head -80
