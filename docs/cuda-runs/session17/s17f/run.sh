#!/bin/bash
# Session 17 call f (H100): the tensor-core decode block's epilogue a warp per row, K and V
# rows queued in one loop (one page lookup), Q read in 4-byte pairs ("new") against call d's
# binary ("b": 16-bit Q on tensor cores, f62a6a0) and HEAD fa0e2e5 ("old"), alternating.
# Verify and verify-model first; ncu step of the new binary (8B Q4_0).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s17f; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 240 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -5; tail -2 $O/verify.txt
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_k_m --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
for p in precise default; do timeout 60 ./flexkern verify-model --device cuda --gpu-path $p --model /tmp/s.gguf --tokens 64 > $O/vm.txt 2>&1; echo "verify-model q4_k_m $p rc=$?: $(tail -1 $O/vm.txt)"; done
date -u +%FT%TZ
S="The three laws of robotics are"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
V="old b new"
for sf in "llama3-8b q4_0 3" "llama3-8b q4_k_m 3" "llama3-8b q8_0 2" "smollm2-135m q4_0 4"; do
  set -- $sf
  timeout 120 ./flexkern synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  for v in $V; do bin=./flexkern_$v; [ $v = new ] && bin=./flexkern; timeout 25 $bin run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1; done
  for r in $(seq 1 $3); do
    line="$1 $2 round $r:"
    for v in $V; do
      bin=./flexkern_$v; [ $v = new ] && bin=./flexkern
      timeout 25 $bin run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >$O/t_$v.txt
      line="$line $v $(grep -h -o 'decode:.*' $O/r.txt | tail -1 | awk '{print $4}')"
    done
    cmp -s $O/t_b.txt $O/t_new.txt && line="$line (b = new text)" || line="$line (b/new text differs)"
    echo "$line" | tee -a $O/rounds.txt
  done
  if [ $2 = q4_0 ]; then
    L=32; [ $1 = smollm2-135m ] && L=30
    FLEXKERN_CUDA_GRAPH=0 timeout 100 $NCU --csv --metrics gpu__time_duration.sum --cache-control none --clock-control none ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 3 --temperature 0 --ctx 160 > $O/ncu_$1.csv 2>/dev/null; echo "ncu rc=$?"
    python3 decode_kernels.py $O/ncu_$1.csv $L > $O/step_$1.txt 2>&1; head -14 $O/step_$1.txt; gzip -f $O/ncu_$1.csv
  fi
  rm -f /tmp/b.gguf
done
rm -f $O/r.txt $O/t_*.txt $O/vm.txt
date -u +%FT%TZ
