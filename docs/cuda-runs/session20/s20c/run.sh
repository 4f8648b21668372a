#!/bin/bash
# Session 20 call c (HEAD kernels; the step trace now keys each kernel by its predecessor and
# adds the release gap and the tail): 8B Q4_0 step timelines, default and 3-stage decode
# attention; decode A/B of the attention's pipeline and split on 8B Q4_0 and SmolLM2; the
# decode attention bench with a largest partition (more waves).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s20c; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 90 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
i=0; for c in "X=0" "FLEXKERN_CUDA_MMA=64,3"; do i=$((i+1))
  env $c FLEXKERN_CUDA_TRACE=step timeout 100 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 48 --temperature 0 --ctx 160 > /dev/null 2> $O/step$i.txt; echo "step$i rc=$? [$c]"
  tr '\r' '\n' < $O/step$i.txt | grep -v "^\s*$" | grep -E "fk_|replay 32" | cut -c1-190
done
FLEXKERN_CUDA_TRACE=step timeout 100 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$S" -n 48 --temperature 0 --ctx 160 > /dev/null 2> $O/step_smol.txt; echo "step smol rc=$?"
tr '\r' '\n' < $O/step_smol.txt | grep -v "^\s*$" | grep -E "fk_|replay 32" | cut -c1-190
L=$O/runs.txt
CFG=("X=0" "FLEXKERN_CUDA_MMA=64,3" "FLEXKERN_CUDA_MMA=64,4" "FLEXKERN_CUDA_SPLIT=64,32")
for m in b s; do for r in 1 2; do for c in "${CFG[@]}"; do
  echo "== $m $r $c" >> $L
  env $c timeout 40 ./flexkern run --device cuda --model /tmp/$m.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $L
  echo "$m rc=$? [$c] $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done; done
rm -f $O/out.txt /tmp/b.gguf
B=$O/bench.txt
for c in "X=0" "FLEXKERN_CUDA_SPLIT=128,192,1344" "FLEXKERN_CUDA_SPLIT=128,192,896" "X=0"; do
  echo "== $c" >> $B
  env $c timeout 60 ./flexkern bench attn --device cuda --only decode >> $B 2>&1
  echo "bench [$c] $(grep -E '^decode' $B | tail -10 | grep -oE '[0-9.]+%' | tr '\n' ' ')"
done
date -u +%FT%TZ
