#!/bin/bash
# Session 11 call b (H100): streamed GEMV with the unrolled prologue and programmatic dependent
# launch. bench gemv A/B (PDL 1 / PDL 0 / staged), ncu of the Q4_0 stream kernel, 8B decode, verify.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s11b; mkdir -p $O
date -u +%FT%TZ > $O/date.txt; nvidia-smi --query-gpu=name,driver_version --format=csv >> $O/date.txt; cat $O/date.txt
F=q8_0,q4_0,q4_k,q6_k
i=0
for v in "1 1" "1 0" "0 1" "1 1" "1 0" "0 1"; do
  set -- $v; i=$((i+1))
  echo "== gemv stream=$1 pdl=$2"; FLEXKERN_GEMV_STREAM=$1 FLEXKERN_GEMV_PDL=$2 timeout 60 ./flexkern bench gemv --device cuda --n 14336,4096,1024 --k 4096 --reps 20 --formats $F > $O/g$i.txt 2>&1; echo rc=$?
  grep -E "^(copy|q)" $O/g$i.txt | cut -c1-62
done
echo "== K14336 (down) and f32 activations, stream pdl=1"
timeout 60 ./flexkern bench gemv --device cuda --n 4096 --k 14336 --reps 20 --formats q8_0,q4_0 > $O/gdown.txt 2>&1; grep -E "^q" $O/gdown.txt | cut -c1-62
timeout 60 ./flexkern bench gemv --device cuda --precise --n 14336,4096 --k 4096 --reps 20 --formats q8_0,q4_0 > $O/gprecise.txt 2>&1; echo rc=$?; grep -E "^q" $O/gprecise.txt | cut -c1-100
echo "== ncu"
timeout 120 ncu --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats --section MemoryWorkloadAnalysis -k regex:fk_gemv --launch-skip 12 --launch-count 1 ./flexkern bench gemv --device cuda --n 4096 --formats q4_0 --reps 3 > $O/ncu_q4_0_4096.txt 2>&1; echo rc=$?
grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Issued Warp|No Eligible|Block Limit|Registers Per|Warp Cycles Per Issued|Waves Per SM|Compute \(SM\)" $O/ncu_q4_0_4096.txt | head -30
echo "== verify"; timeout 170 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -20; tail -2 $O/verify.txt
echo "== 8B q4_0"; timeout 60 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/m8.gguf > $O/synth.txt 2>&1; echo rc=$?
P="The three laws of robotics are"
timeout 60 ./flexkern run --device cuda --model /tmp/m8.gguf --prompt "$P" -n 4 --temperature 0 --ctx 100 >/dev/null 2>&1
for v in "1 1" "1 0" "0 1" "1 1" "1 0" "0 1"; do
  set -- $v
  FLEXKERN_GEMV_STREAM=$1 FLEXKERN_GEMV_PDL=$2 timeout 60 ./flexkern run --device cuda --model /tmp/m8.gguf --prompt "$P" -n 64 --temperature 0 --ctx 100 2>$O/r.txt >/dev/null; echo "stream=$1 pdl=$2 rc=$? $(grep -h decode $O/r.txt | tail -1 | cut -c1-70)"
done
