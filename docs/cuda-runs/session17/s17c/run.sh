#!/bin/bash
# Session 17 call c (H100): decode attention on tensor cores (16-bit Q written by the RoPE
# launch) against HEAD fa0e2e5 ("old", f32 Q, the scalar cp.async kernel); short decode split
# into partitions the tensor-core kernel joins itself (FLEXKERN_CUDA_SPLIT=min_chunk,merge_cost).
# Verify, verify-model (SmolLM2 Q4_K_M), then decode rounds, alternating; ncu step of 8B Q4_0.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s17c; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 240 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -5; tail -2 $O/verify.txt
grep -i "rope_kv_write" $O/verify.txt | head -3
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_k_m --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
for p in precise default; do timeout 60 ./flexkern verify-model --device cuda --gpu-path $p --model /tmp/s.gguf --tokens 64 > $O/vm.txt 2>&1; echo "verify-model q4_k_m $p rc=$?: $(tail -1 $O/vm.txt)"; done
date -u +%FT%TZ
S="The three laws of robotics are"
declare -A B=([old]=./flexkern_old [new]=./flexkern [s64]=./flexkern [s64m]=./flexkern)
declare -A E=([old]="X=1" [new]="X=1" [s64]="FLEXKERN_CUDA_SPLIT=64,0" [s64m]="FLEXKERN_CUDA_SPLIT=64,96")
V="old new s64 s64m"
for sf in "smollm2-135m q4_0" "llama3-8b q4_0" "llama3-8b q4_k_m"; do
  set -- $sf
  timeout 120 ./flexkern synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  for v in $V; do env ${E[$v]} timeout 60 ${B[$v]} run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1; done
  for r in 1 2 3; do
    line="$1 $2 round $r:"
    for v in $V; do
      env ${E[$v]} timeout 60 ${B[$v]} run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >$O/t_$v.txt
      line="$line $v $(grep -h -o 'decode:.*' $O/r.txt | tail -1 | awk '{print $4}')"
      cmp -s $O/t_new.txt $O/t_$v.txt || line="$line(text differs)"
    done
    echo "$line" | tee -a $O/rounds.txt
  done
  if [ $2 = q4_0 ] && [ $1 = llama3-8b ]; then
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    FLEXKERN_CUDA_GRAPH=0 timeout 150 $NCU --csv --metrics gpu__time_duration.sum --cache-control none --clock-control none ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 3 --temperature 0 --ctx 160 > $O/ncu.csv 2>/dev/null; echo "ncu rc=$?"
    python3 decode_kernels.py $O/ncu.csv 32 > $O/step.txt 2>&1; head -30 $O/step.txt; gzip -f $O/ncu.csv
  fi
  rm -f /tmp/b.gguf
done
rm -f $O/r.txt $O/t_*.txt $O/vm.txt
date -u +%FT%TZ
