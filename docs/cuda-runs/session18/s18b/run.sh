#!/bin/bash
# Session 18 call b (H100): where a fresh attention plan's host time goes (diagnostic binary);
# B1 x 128k with a largest partition (more waves); ncu of the fp8 paged decode kernel; the
# streamed GEMV's units per batch (FLEXKERN_GEMV_SUN) in the 8B Q4_0 decode.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s18b; mkdir -p $O
date -u +%FT%TZ
for sh in "Hq9/Hkv3 D64 bf16 paged16" "B1 L131072 Hq32/Hkv8 D128 bf16 contiguous"; do
  FK_DIAG=1 timeout 30 ./flexkern_diag bench attn --device cuda --only "$sh" > $O/diag.txt 2>&1; echo "diag $sh rc=$?"; grep DIAG $O/diag.txt | sed -n '5p;15p;25p'
done
for x in 0 1344 896 672 448; do
  if [ $x = 0 ]; then unset FLEXKERN_CUDA_SPLIT; else export FLEXKERN_CUDA_SPLIT=128,192,$x; fi
  timeout 40 ./flexkern bench attn --device cuda --only "B1 L131072" > $O/b1_$x.txt 2>&1; echo "max_chunk $x rc=$?"
  grep -E "^  decode" $O/b1_$x.txt | sed -E 's/.*(partitions of [0-9]+ keys).*(planned afresh.*)/\1 \2/'
  grep -E "^decode" $O/b1_$x.txt | sed 's/  */ /g'
done
unset FLEXKERN_CUDA_SPLIT
date -u +%FT%TZ
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 120 $NCU --set full --import-source no --warp-sampling-interval 0 -k regex:fk_attention_mma --launch-skip 4 --launch-count 1 -o $O/fp8 ./flexkern bench attn --device cuda --only "fp8e4m3 paged16" > $O/log.txt 2>&1; echo "ncu fp8 rc=$?"
$NCU -i $O/fp8.ncu-rep --page details > $O/fp8_details.txt 2>&1
$NCU -i $O/fp8.ncu-rep --page source --csv --print-source sass > $O/fp8_sass.csv 2>&1
python3 stalls.py $O/fp8_sass.csv > $O/fp8_stalls.txt 2>&1; head -12 $O/fp8_stalls.txt
grep -E "Duration|Registers Per|Achieved Occ|DRAM Throughput|Issue Slots Busy|Executed Ipc A" $O/fp8_details.txt | head -8
gzip -f $O/fp8_sass.csv; rm -f $O/fp8.ncu-rep $O/log.txt
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 120 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/b.gguf > /dev/null 2>&1
timeout 25 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 4 --temperature 0 --ctx 160 >/dev/null 2>&1
for r in 1 2 3; do
  line="8B q4_0 round $r:"
  for sun in def 4 2; do
    if [ $sun = def ]; then unset FLEXKERN_GEMV_SUN; else export FLEXKERN_GEMV_SUN=$sun; fi
    timeout 25 ./flexkern run --device cuda --model /tmp/b.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 2>$O/r.txt >/dev/null
    line="$line sun=$sun $(grep -h -o 'decode:.*' $O/r.txt | tail -1 | awk '{print $4}')"
  done
  echo "$line" | tee -a $O/rounds.txt
done
rm -f /tmp/b.gguf $O/r.txt $O/diag.txt
date -u +%FT%TZ
