#!/bin/bash
# Session 11 call c (H100): streamed GEMV without 64-bit divisions, 3 blocks per SM on the integer path.
# A/B against call b's binary (flexkern_b), alternated; ncu of the new Q4_0 kernel; 8B decode A/B.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s11c; mkdir -p $O
date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
F=q8_0,q4_0,q4_k,q6_k
for b in flexkern flexkern_b flexkern flexkern_b; do
  echo "== $b gemv"; timeout 60 ./$b bench gemv --device cuda --n 14336,4096,1024 --k 4096 --reps 20 --formats $F > $O/g.txt 2>&1; echo rc=$?
  grep -E "^(copy|q)" $O/g.txt | cut -c1-62
  timeout 60 ./$b bench gemv --device cuda --n 4096 --k 14336 --reps 20 --formats q8_0,q4_0 > $O/g.txt 2>&1; grep -E "^q" $O/g.txt | cut -c1-62
done
echo "== ncu"
timeout 120 ncu --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section InstructionStats -k regex:fk_gemv --launch-skip 12 --launch-count 1 ./flexkern bench gemv --device cuda --n 4096 --formats q4_0 --reps 3 > $O/ncu_q4_0_4096.txt 2>&1; echo rc=$?
grep -E "Duration|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Issued Warp|No Eligible|Warp Cycles Per Issued|Executed Instructions  |Stall|stall" $O/ncu_q4_0_4096.txt | head -30
echo "== verify"; timeout 170 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -20; tail -2 $O/verify.txt
echo "== 8B q4_0"; timeout 60 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/m8.gguf > $O/synth.txt 2>&1; echo rc=$?
P="The three laws of robotics are"
timeout 60 ./flexkern run --device cuda --model /tmp/m8.gguf --prompt "$P" -n 4 --temperature 0 --ctx 100 >/dev/null 2>&1
timeout 60 ./flexkern_b run --device cuda --model /tmp/m8.gguf --prompt "$P" -n 4 --temperature 0 --ctx 100 >/dev/null 2>&1
for b in flexkern flexkern_b flexkern flexkern_b; do
  timeout 60 ./$b run --device cuda --model /tmp/m8.gguf --prompt "$P" -n 64 --temperature 0 --ctx 100 2>$O/r.txt >/dev/null; echo "$b rc=$? $(grep -h decode $O/r.txt | tail -1 | cut -c1-70)"
done
