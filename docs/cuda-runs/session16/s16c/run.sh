#!/bin/bash
# Session 16 call c (H100): Q6_K's GEMV three ways, alternating (pipelined half-block batches,
# FLEXKERN_GEMV_PIPE=0 32-weight units unrolled, FLEXKERN_GEMV_DIRECT=0 the ring over the planar
# layout) at the 8B shapes and the output's 49152 x 4096; then ncu kernel durations of one 8B
# Q4_K_M decode step (graph off, caches and clocks as they are).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s16c; mkdir -p $O
date -u +%FT%TZ
g() { grep -E "^(q8_0|q4_0|q4_k|q6_k)" $1 | awk '{print $1,$2,$3,$4,$6}' | tr '\n' ';'; echo; }
for r in 1 2; do
  for v in pipe PIPE=0 DIRECT=0; do
    env=""; [ $v != pipe ] && env="FLEXKERN_GEMV_$v"
    env $env ./flexkern bench gemv --device cuda --graph --reps 20 --formats q6_k --n 14336,4096,49152 --k 4096 > $O/gemv_${v}_$r.txt 2>&1
    env $env ./flexkern bench gemv --device cuda --graph --reps 20 --formats q6_k,q4_k --n 4096 --k 14336 >> $O/gemv_${v}_$r.txt 2>&1
    echo "gemv $v $r: $(g $O/gemv_${v}_$r.txt)"
  done
done
grep "copy bandwidth" $O/gemv_pipe_1.txt | head -1
S="The three laws of robotics are"
timeout 200 ./flexkern synth-model --shape llama3-8b --format q4_k_m --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1
for v in pipe PIPE=0 DIRECT=0 pipe; do
  env=""; [ $v != pipe ] && env="FLEXKERN_GEMV_$v"
  env $env timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >/dev/null
  echo "8b q4_k_m $v $(grep -h -o 'decode:.*' $O/r.txt | tail -1 | cut -c1-40)"
done
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
FLEXKERN_CUDA_GRAPH=0 timeout 200 $NCU --csv --metrics gpu__time_duration.sum --cache-control none --clock-control none ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 3 --temperature 0 --ctx 160 > $O/ncu.csv 2>$O/ncu_err.txt; echo "ncu rc=$?"
python3 decode_kernels.py $O/ncu.csv 32 > $O/step.txt 2>&1; cat $O/step.txt | head -60
rm -f /tmp/b.gguf $O/r.txt
cd $O && cat gemv_*_2.txt > gemv_2.txt && rm gemv_*_2.txt && cat gemv_*_1.txt > gemv_1.txt && rm gemv_*_1.txt && gzip -f ncu.csv
date -u +%FT%TZ
