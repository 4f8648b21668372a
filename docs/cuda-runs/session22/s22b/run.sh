#!/bin/bash
# Session 22 call b (H200): exploration. The GEMV's blocks per SM (more bytes in flight) in
# graph replays; ncu of the Q4_0 and Q4_K GEMVs at 14336 x 4096; the decode attention's block
# timeline (FLEXKERN_CUDA_TRACE=1).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s22b; mkdir -p $O
date -u +%FT%TZ
G=$O/gemv.txt
for r in 1 2; do for c in "X=0" "FLEXKERN_GEMV_FIT=3 FLEXKERN_GEMV_MINB=3" "FLEXKERN_GEMV_FIT=1 FLEXKERN_GEMV_MINB=1" "FLEXKERN_GEMV_FIT=4 FLEXKERN_GEMV_MINB=4"; do
  echo "== $r [$c]" >> $G
  env $c timeout 60 ./flexkern bench gemv --device cuda --graph --reps 20 --formats q4_0,q4_k,q6_k,q8_0 --n 14336,4096 --k 4096 >> $G 2>&1
  env $c timeout 60 ./flexkern bench gemv --device cuda --graph --reps 20 --formats q4_0,q4_k --n 4096 --k 14336 >> $G 2>&1
done; done
echo "gemv done"; grep -E "^==|^q|copy bandwidth" $G | awk '/^==/{print; next} /copy/{next} {printf "  %s %s %s %s %s\n", $1,$2,$3,$6,$NF}'
date -u +%FT%TZ
for f in q4_0 q4_k; do
timeout 120 ncu --clock-control none -k regex:fk_gemv --launch-skip 8 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats ./flexkern bench gemv --device cuda --reps 5 --formats $f --n 14336 --k 4096 > $O/ncu_$f.txt 2>&1; echo "ncu $f rc=$?"
done
grep -E "DRAM Throughput|Memory Throughput|Duration|Achieved Occupancy|Registers Per|Stall|Warp Cycles Per Issued|Issue Slot|Eligible|Block Limit|L2 Hit|Mem Busy|Max Bandwidth" $O/ncu_q4_0.txt | head -30
date -u +%FT%TZ
FLEXKERN_CUDA_TRACE=1 timeout 90 ./flexkern bench attn --device cuda --only decode > $O/trace_decode.txt 2>&1; echo "trace rc=$?"
date -u +%FT%TZ
