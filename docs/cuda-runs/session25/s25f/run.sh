#!/bin/bash
# Session 25 call f (H200): where a Q4_K GEMV's L2 traffic goes. ncu on one 14336 x 4096 launch
# of Q4_K and of Q4_0: L1/TEX global-load requests and sectors, L2 sectors to L1, DRAM bytes.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s25f; mkdir -p $O
date -u +%FT%TZ
M=dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sector_hit_rate.pct,l1tex__m_xbar2l1tex_read_sectors.sum,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct
for f in q4_k q4_0 q6_k; do
  timeout 120 ncu --metrics $M -k regex:fk_gemv --launch-skip 8 --launch-count 1 ./flexkern bench gemv --device cuda --n 14336 --k 4096 --formats $f --reps 3 > $O/ncu_$f.txt 2>&1; echo "$f rc=$?"
  grep -E "fk_gemv|dram__|lts__|l1tex__|gpu__time" $O/ncu_$f.txt | sed 's/  */ /g' | cut -c1-120
done
date -u +%FT%TZ
