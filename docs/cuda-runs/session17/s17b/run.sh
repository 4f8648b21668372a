#!/bin/bash
# Session 17 call b: ncu's full set + SASS source page on one decode attention launch per model.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s17b; mkdir -p $O
S="The three laws of robotics are"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for sf in "smollm2-135m q4_0" "llama3-8b q4_0"; do
  set -- $sf
  timeout 120 ./flexkern synth-model --shape $1 --format $2 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
  for W in 4 8; do
  FLEXKERN_CUDA_WARPS=$W FLEXKERN_CUDA_GRAPH=0 timeout 150 $NCU --set full --import-source no --warp-sampling-interval 0 -k regex:fk_attention --launch-skip 40 --launch-count 1 -o $O/attn_$1_w$W ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 8 --temperature 0 --ctx 160 > $O/log.txt 2>&1; echo "ncu $1 rc=$?"; tail -3 $O/log.txt
  $NCU -i $O/attn_$1_w$W.ncu-rep --page details > $O/attn_$1_w${W}_details.txt 2>&1
  $NCU -i $O/attn_$1_w$W.ncu-rep --page source --csv --print-source sass > $O/attn_$1_w${W}_sass.csv 2>&1
  head -c 300 $O/attn_$1_w${W}_sass.csv; echo; grep -E "Duration|Registers|Block Size|Grid Size|Achieved Occ" $O/attn_$1_w${W}_details.txt | head -8
  done
  tar czf $O/attn_$1.tgz -C $O $(cd $O; ls attn_$1_*) && rm -f $O/attn_$1_*
  rm -f /tmp/b.gguf
done
rm -f $O/log.txt
