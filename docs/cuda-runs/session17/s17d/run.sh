#!/bin/bash
# Session 17 call d (H100): decode attention on tensor cores (16-bit Q from the RoPE launch,
# f62a6a0+) against HEAD fa0e2e5 ("old": f32 Q, the scalar cp.async kernel), and short decode
# split into 64-key partitions the tensor-core kernel joins itself (FLEXKERN_CUDA_SPLIT=64,0 /
# 64,96), alternating; ncu step of the new binary for 8B Q4_0 and SmolLM2 Q4_0.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s17d; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
declare -A B=([old]=./flexkern_old [new]=./flexkern [s64]=./flexkern [s64m]=./flexkern)
declare -A E=([old]="X=1" [new]="X=1" [s64]="FLEXKERN_CUDA_SPLIT=64,0" [s64m]="FLEXKERN_CUDA_SPLIT=64,96")
declare -A DEAD=()
V="old new s64 s64m"
for sf in "llama3-8b q4_0 3" "smollm2-135m q4_0 5" "llama3-8b q4_k_m 3"; do
  set -- $sf
  timeout 120 ./flexkern synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  for v in $V; do env ${E[$v]} timeout 25 ${B[$v]} run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1 || { DEAD[$v]=1; echo "$v failed its warm-up: dropped"; }; done
  for r in $(seq 1 $3); do
    line="$1 $2 round $r:"
    for v in $V; do
      [ -n "${DEAD[$v]}" ] && continue
      env ${E[$v]} timeout 25 ${B[$v]} run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >$O/t_$v.txt || DEAD[$v]=1
      line="$line $v $(grep -h -o 'decode:.*' $O/r.txt | tail -1 | awk '{print $4}')"
      cmp -s $O/t_new.txt $O/t_$v.txt || line="$line(text differs)"
    done
    echo "$line" | tee -a $O/rounds.txt
  done
  if [ $2 = q4_0 ]; then
    L=32; [ $1 = smollm2-135m ] && L=30
    FLEXKERN_CUDA_GRAPH=0 timeout 100 $NCU --csv --metrics gpu__time_duration.sum --cache-control none --clock-control none ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 3 --temperature 0 --ctx 160 > $O/ncu_$1.csv 2>/dev/null; echo "ncu rc=$?"
    python3 decode_kernels.py $O/ncu_$1.csv $L > $O/step_$1.txt 2>&1; head -24 $O/step_$1.txt; gzip -f $O/ncu_$1.csv
  fi
  rm -f /tmp/b.gguf
done
rm -f $O/r.txt $O/t_*.txt
date -u +%FT%TZ
