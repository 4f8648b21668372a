#!/bin/bash
# Session 24 call f (H200): issue 15's D64 prefill cases (B4 H16 S4096) under the Hopper
# kernel's settings: default, softmax overlapped with P V, Q from shared memory, other tiles /
# pipelines; two rounds alternating.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s24f; mkdir -p $O
date -u +%FT%TZ
arm() { local l=$1; shift
  env "$@" timeout 60 ./flexkern bench attn --device cuda --only "S4096 D64" > $O/a.txt 2>&1
  echo "== $l" >> $O/all.txt; cat $O/a.txt >> $O/all.txt
  echo "$l: $(grep -E '^prefill' $O/a.txt | awk '{printf "%.0f|", $(NF-5)/1000}')"
}
for r in 1 2; do
  arm default X=1
  arm overlap FLEXKERN_CUDA_WG_OVERLAP=1
  arm qsmem FLEXKERN_CUDA_WG_S=1
  arm t128s6 FLEXKERN_CUDA_MMA=128,6
  arm t64s6 FLEXKERN_CUDA_MMA=64,6
  arm t128s3 FLEXKERN_CUDA_MMA=128,3
done
grep -E "^prefill" $O/a.txt | cut -c1-60
date -u +%FT%TZ
