#!/bin/bash
# Session 26 call j: ncu on the same bytes as 14336 x 4096 and 4096 x 14336 (Q4_0, Q4_K): why the
# long rows (a decode step's down projection) stream slower.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s26j; mkdir -p $O
for f in q4_0 q4_k; do for s in "14336 4096" "4096 14336"; do set -- $s
  timeout 120 ncu --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --metrics dram__bytes_read.sum,gpu__time_duration.sum,sm__cycles_active.avg,smsp__cycles_active.avg -k regex:fk_gemv --launch-skip 8 --launch-count 1 ./flexkern bench gemv --device cuda --n $1 --k $2 --formats $f --reps 3 > $O/ncu_${f}_$1x$2.txt 2>&1
  echo "== $f $1 x $2"; grep -E "Duration|DRAM Throughput|dram__bytes|Stall|Warp Cycles Per Issued|Achieved Occupancy|Block Limit|Registers Per|Grid Size|cycles_active|Shared Memory Config" $O/ncu_${f}_$1x$2.txt | sed 's/  */ /g' | cut -c1-140 | head -30
done; done
