#!/bin/bash
# Session 14 call b (H100): ncu of single GEMV launches (streamed Q4_0 / Q8_0 / Q4_K, direct
# F16): duration, DRAM throughput, occupancy, issue rate and warp stall reasons.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s14b; mkdir -p $O
date -u +%FT%TZ
for c in "q4_0 14336 4096" "q4_0 4096 4096" "q8_0 14336 4096" "q4_k 14336 4096" "f16 14336 4096"; do
  set -- $c
  timeout 120 ncu --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats --metrics smsp__inst_executed.sum,dram__bytes_read.sum,gpu__time_duration.sum,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,smsp__average_warps_issue_stalled_imc_miss_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio,smsp__average_warps_issue_stalled_tex_throttle_per_issue_active.ratio -k regex:fk_gemv --launch-skip 6 --launch-count 1 ./flexkern bench gemv --device cuda --reps 2 --formats $1 --n $2 --k $3 > $O/ncu_$1_$2.txt 2>&1
  echo "== $c"; grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Issued Warp Per Scheduler|No Eligible|Warp Cycles Per Issued|inst_executed.sum|dram__bytes_read.sum|Registers Per|Block Limit|Grid Size|Dynamic Shared" $O/ncu_$1_$2.txt | sed 's/  */ /g' | head -20
  grep -E "stalled" $O/ncu_$1_$2.txt | sed "s/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//; s/  */ /g" | tr "\n" ";"; echo
done
date -u +%FT%TZ
