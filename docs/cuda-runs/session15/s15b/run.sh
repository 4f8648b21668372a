#!/bin/bash
# Session 15 call b (H100): why the persistent Hopper prefill lost 6-9 % on cases without hooks
# (call a), chunked prefill included, whose 128 works run a block each. A/B/C: persistent,
# FLEXKERN_CUDA_PERSIST=0 (a block per work, same kernel), the session-14 binary; ncu of
# non-causal D128 for the new and old binaries; the peers.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s15b; mkdir -p $O
date -u +%FT%TZ
row() { grep -E "^(prefill|chunked)" $1 | awk '{n=NF; printf "%.0f|", $(n-5)/1000}'; echo; }
for r in 1 2; do
  echo "-- new $r"; timeout 150 ./flexkern bench attn --device cuda --only prefill > $O/new_$r.txt 2>&1; row $O/new_$r.txt
  echo "-- new PERSIST=0 $r"; FLEXKERN_CUDA_PERSIST=0 timeout 150 ./flexkern bench attn --device cuda --only prefill > $O/p0_$r.txt 2>&1; row $O/p0_$r.txt
  echo "-- old $r"; timeout 150 ./flexkern_old bench attn --device cuda --only prefill > $O/old_$r.txt 2>&1; row $O/old_$r.txt
done
for b in flexkern flexkern_old; do
  timeout 120 ncu --section SpeedOfLight --section WarpStateStats --section SchedulerStats -k fk_attention_mma --launch-skip 2 --launch-count 1 ./$b bench attn --device cuda --only "S8192 D128 non-causal" > $O/ncu_$b.txt 2>&1
  echo "== ncu $b"; grep -E "Duration|SM Throughput|Compute \(SM\)|Issue Slots Busy|Issued Ipc|No Eligible|Stall|Warp Cycles Per Issued|Active Warps" $O/ncu_$b.txt | head -16
done
echo "== peers"; timeout 200 python3 prefill_peers_cuda.py > $O/peers.txt 2>&1; grep -E "matmul|flex " $O/peers.txt | awk '{print $(NF-2)}' | tr '\n' '|'; echo
date -u +%FT%TZ
