#!/bin/bash
# Session 12 call b (H100): graphs with stable attention buffers (nodes updated only when the
# plan's grid or arguments change), A/B alternating; ncu kernel durations of one decode step
# (graphs off) on 1B Q4_K_M and 8B Q4_0.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s12b; mkdir -p $O
date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
P="The three laws of robotics are"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); echo "ncu: $NCU"
for s in smollm2-135m:q4_0:30 llama3-1b:q4_k_m:16 llama3-8b:q4_0:32; do
  IFS=: read shape f L <<< "$s"
  timeout 60 ./flexkern synth-model --shape $shape --format $f --tokenizer bytes --vocab 49152 --out /tmp/m.gguf > /dev/null 2>&1 || { echo "synth $s failed"; continue; }
  timeout 40 ./flexkern run --device cuda --model /tmp/m.gguf --prompt "$P" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1
  for g in 1 0 1 0 1 0; do
    FLEXKERN_CUDA_GRAPH=$g timeout 40 ./flexkern run --device cuda --model /tmp/m.gguf --prompt "$P" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >$O/t$g.txt; echo "$shape $f graph=$g rc=$? $(grep -h decode $O/r.txt | tail -1 | cut -c1-75)"
  done
  cmp -s $O/t1.txt $O/t0.txt && echo "  $s: greedy text identical graph/eager" || echo "  $s: greedy text DIFFERS graph/eager"
  if [ "$shape" != smollm2-135m ]; then
    FLEXKERN_CUDA_GRAPH=0 timeout 150 $NCU --csv --metrics gpu__time_duration.sum ./flexkern run --device cuda --model /tmp/m.gguf --prompt "$P" -n 3 --temperature 0 --ctx 160 > $O/ncu_$shape.csv 2>$O/ncu_err.txt; echo "ncu rc=$?"
    python3 decode_kernels.py $O/ncu_$shape.csv $L
  fi
done
