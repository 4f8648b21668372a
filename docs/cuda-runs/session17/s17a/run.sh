#!/bin/bash
# Session 17 call a (H100), HEAD fa0e2e5: verify; the decode attention's existing switches
# alternating on SmolLM2 / 8B Q4_0 decode; ncu's full set + SASS source page on one decode
# attention launch of each model (where its ~10 us go at ~100 keys).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s17a; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 240 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -5; tail -2 $O/verify.txt
date -u +%FT%TZ
S="The three laws of robotics are"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
declare -A E=([def]="X=1" [t64s3]="FLEXKERN_CUDA_MMA=64,3" [nomma]="FLEXKERN_CUDA_MMA=0" [t128s2]="FLEXKERN_CUDA_MMA=128,2" [w8]="FLEXKERN_CUDA_WARPS=8")
V="def t64s3 nomma t128s2 w8"
for sf in "smollm2-135m q4_0" "llama3-8b q4_0"; do
  set -- $sf
  timeout 120 ./flexkern synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  for v in $V; do env ${E[$v]} timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1; done
  for r in 1 2 3; do
    line="$1 round $r:"
    for v in $V; do
      env ${E[$v]} timeout 60 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >$O/t_$v.txt
      line="$line $v $(grep -h -o 'decode:.*' $O/r.txt | tail -1 | awk '{print $4}')"
      cmp -s $O/t_def.txt $O/t_$v.txt || line="$line(text differs)"
    done
    echo "$line" | tee -a $O/rounds.txt
  done
  # One decode attention launch (the 40th: past the prompt, a decode step), full set + SASS.
  FLEXKERN_CUDA_GRAPH=0 timeout 150 $NCU --set full --import-source no --sampling-interval 0 -k regex:fk_attention --launch-skip 40 --launch-count 1 -o $O/attn_$1 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 8 --temperature 0 --ctx 160 > $O/ncu_log_$1.txt 2>&1; echo "ncu $1 rc=$?"
  $NCU -i $O/attn_$1.ncu-rep --page details > $O/attn_$1_details.txt 2>&1
  $NCU -i $O/attn_$1.ncu-rep --page source --csv --print-source sass > $O/attn_$1_sass.csv 2>&1 || $NCU -i $O/attn_$1.ncu-rep --page source --csv > $O/attn_$1_sass.csv 2>&1
  head -c 600 $O/attn_$1_sass.csv; echo; grep -E "Duration|Registers|Block Size|Grid Size|Achieved Occ|Theoretical Occ|Shared Memory Config|Dynamic Shared" $O/attn_$1_details.txt | head -12
  tar czf $O/attn_$1.tgz -C $O attn_$1_details.txt attn_$1_sass.csv attn_$1.ncu-rep ncu_log_$1.txt && rm -f $O/attn_$1_details.txt $O/attn_$1_sass.csv $O/attn_$1.ncu-rep $O/ncu_log_$1.txt
  rm -f /tmp/b.gguf
done
rm -f $O/r.txt $O/t_*.txt
date -u +%FT%TZ
