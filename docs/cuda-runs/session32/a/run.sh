#!/bin/bash
# Session 32 call a: (1) the in-kernel join of up to 8 partitions (FLEXKERN_CUDA_JOIN_PARTS=8)
# against 4 (main: B8 x 32k's 6 partitions go to the merge kernel), bench attn --only decode,
# three rounds alternating; (2) contiguous K/V token-major (FLEXKERN_BENCH_KV=token, the paged
# pool's order within a page) against head-major, two rounds: does the layout explain paged
# decode's gap to contiguous (fp8, D 64)?; (3) verify --device cuda with the join of 8.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/a; mkdir -p $O
B=../../../../.devcarry/s32a/flexkern
date -u +%FT%TZ
p() { grep -o 'queued behind GPU work [0-9.]* ms, [0-9.]* % of copy, [0-9.]* % of read' $1 | awk '{printf "%s ", $(NF-3)}'; }
for r in 1 2 3; do for j in 8 4; do
  FLEXKERN_CUDA_JOIN_PARTS=$j timeout 60 $B bench attn --device cuda --only decode > $O/x.log 2>&1; echo "decode join$j rc=$? queued % of read: $(p $O/x.log)"; cat $O/x.log >> $O/attn_join$j.log
done; done
date -u +%FT%TZ
for r in 1 2; do for k in token head; do
  FLEXKERN_BENCH_KV=$k timeout 60 $B bench attn --device cuda --only decode > $O/x.log 2>&1; echo "decode kv=$k rc=$? queued % of read: $(p $O/x.log)"; cat $O/x.log >> $O/attn_kv_$k.log
done; done
date -u +%FT%TZ
FLEXKERN_CUDA_JOIN_PARTS=8 timeout 200 $B verify --device cuda > $O/verify_join8.log 2>&1; echo "verify (join 8) rc=$?"
grep -E "FAIL|^verify|modules" $O/verify_join8.log | cut -c1-200 | head -12
rm -f $O/x.log
date -u +%FT%TZ
