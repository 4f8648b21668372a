#!/bin/bash
# Session 27 call a (01c40a8): verify (first GPU run of the k 14336 bulk-ring case on sixteen
# warps); B1 x 128k decode bf16 / fp8 with ncu's full set on one launch of each; cuBLAS GEMV
# peers (graph); knobs: one block an SM of a co-resident pair with deeper rings (Q4_0).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s27a; mkdir -p $O
date -u +%FT%TZ
timeout 170 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.txt | cut -c1-200 | head -20
date -u +%FT%TZ
timeout 60 ./flexkern bench attn --device cuda --only L131072 > $O/attn.txt 2>&1; echo "attn rc=$?"
grep -E "^decode|copy" $O/attn.txt | cut -c1-150 | head -12
for c in "fp8e4m3 contiguous" "bf16 contiguous"; do
  f=$O/ncu_$(echo $c | cut -d' ' -f1).txt
  timeout 120 ncu --set full --import-source no -k regex:fk_attention --launch-skip 3 --launch-count 1 ./flexkern bench attn --device cuda --only "L131072 Hq32/Hkv8 D128 $c" > $f 2>&1; echo "ncu $c rc=$?"
  grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Issue Slots Busy|Issued Ipc|Eligible Warps|No Eligible|Warp Cycles Per Issued|Achieved Occupancy|Registers Per|Stall|L1/TEX Hit|L2 Hit|Executed Ipc|Shared Memory Config|Block Limit" $f | sed 's/  */ /g' | cut -c1-150 | head -45
done
date -u +%FT%TZ
for g in "" "FLEXKERN_GEMV_GRID=1 FLEXKERN_GEMV_BULK=4" "FLEXKERN_GEMV_GRID=1 FLEXKERN_GEMV_BULK=5" ""; do
  env $g timeout 40 ./flexkern bench gemv --device cuda --graph --reps 20 --n 4096,14336 --k 4096 --formats q4_0 > $O/g.txt 2>&1
  echo "== $g" >> $O/gemv.txt; cat $O/g.txt >> $O/gemv.txt
  echo "[$g]: $(grep -E '^ *(q4_k|q4_0|q8_0|q6_k) ' $O/g.txt | awk '{printf "%s %s %s %s | ", $1, $2, $5, $6}')"
done
date -u +%FT%TZ
PYTHONUNBUFFERED=1 timeout 100 python3 gemv_peers_cuda.py --graph > $O/gemv_peers.txt 2>&1; echo "gemv peers rc=$?"; tail -9 $O/gemv_peers.txt
date -u +%FT%TZ
