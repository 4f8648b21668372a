#!/bin/bash
# Session 13 call p (H100): the Hopper prefill's pipeline now that TMA copies the tiles:
# default (128-key tiles, 3 stages at D 128, 4 at D 64) against 64-key tiles with 5-6 stages
# (FLEXKERN_CUDA_MMA=tile,stages), alternated.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s13p; mkdir -p $O
date -u +%FT%TZ
for v in "" "FLEXKERN_CUDA_MMA=64,6" "FLEXKERN_CUDA_MMA=64,5" "" "FLEXKERN_CUDA_MMA=64,6" "FLEXKERN_CUDA_MMA=128,4"; do
  echo "-- [$v]"; env $v timeout 100 ./flexkern bench attn --device cuda --only prefill > $O/p.txt 2>&1
  grep -E "^prefill" $O/p.txt | python3 -c "
import sys,re
for l in sys.stdin:
    m=re.match(r'(.*?)\s{2,}([\d.]+)\s+([\d.]+)',l)
    print(' ', m.group(1).strip()[8:], round(float(m.group(3))/1000))
" | tr '\n' ';'; echo
done
