#!/bin/bash
# Session 25 call h (H200): why a Q4_K GEMV warp waits. ncu warp-state, scheduler and source
# counters on one 14336 x 4096 Q4_K launch (HEAD).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s25h; mkdir -p $O
date -u +%FT%TZ
timeout 150 ncu --section WarpStateStats --section SchedulerStats --section SourceCounters --section LaunchStats --section Occupancy -k regex:fk_gemv --launch-skip 8 --launch-count 1 ./flexkern bench gemv --device cuda --n 14336 --k 4096 --formats q4_k --reps 3 > $O/ncu_q4_k.txt 2>&1; echo "rc=$?"
grep -E "Stall|stall|Warp Cycles|Issued|Eligible|Active Warps|Registers|Theoretical|Achieved|No Eligible|One or More" $O/ncu_q4_k.txt | sed 's/  */ /g' | cut -c1-160 | head -40
date -u +%FT%TZ
