#!/bin/bash
# Session 17 call e (H100), f62a6a0+: ncu full set + SASS source page on one 8B Q4_0 decode
# step's first-layer GEMVs (QKV, wo, gate/up, down) and its tensor-core decode attention.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s17e; mkdir -p $O
S="The three laws of robotics are"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 120 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
timeout 25 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1
for k in "fk_gemv 130 4" "fk_attention 33 1"; do
  set -- $k
  FLEXKERN_CUDA_GRAPH=0 timeout 150 $NCU --set full --import-source no --warp-sampling-interval 0 -k regex:$1 --launch-skip $2 --launch-count $3 -o $O/$1 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 > $O/log.txt 2>&1; echo "ncu $1 rc=$?"; tail -2 $O/log.txt
  $NCU -i $O/$1.ncu-rep --page details > $O/$1_details.txt 2>&1
  $NCU -i $O/$1.ncu-rep --page source --csv --print-source sass > $O/$1_sass.csv 2>&1
  grep -E "^  [a-z_]+.*\(|Duration|Registers Per|Grid Size|Achieved Occ|Dynamic Shared" $O/$1_details.txt | head -30
done
tar czf $O/prof.tgz -C $O $(cd $O; ls *_details.txt *_sass.csv *.ncu-rep) && rm -f $O/*_details.txt $O/*_sass.csv $O/*.ncu-rep $O/log.txt
rm -f /tmp/b.gguf
