#!/bin/bash
# Session 22 call f (H200): exploration for issue 13 on this card: the decode split's chunk
# bounds (FLEXKERN_CUDA_SPLIT=min,merge,max) at B1 x 128k, alternating, two rounds.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s22f; mkdir -p $O
date -u +%FT%TZ
for r in 1 2; do for c in "X=0" "FLEXKERN_CUDA_SPLIT=128,192,1344" "FLEXKERN_CUDA_SPLIT=128,192,896" "FLEXKERN_CUDA_SPLIT=128,192,2048" "FLEXKERN_CUDA_SPLIT=128,64"; do
  echo "== $r [$c]" >> $O/split.txt
  env $c timeout 60 ./flexkern bench attn --device cuda --only decode >> $O/split.txt 2>&1
done; done
grep -E "^==|^decode B1|^decode B8" $O/split.txt | awk '/^==/{print; next} {printf "  %s %s %s %s %s\n", $3,$6,$7,$(NF-3),$(NF-2)}'
date -u +%FT%TZ
