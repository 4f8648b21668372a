#!/bin/bash
# Session 13 call m (H100): issue 13's decode shapes, A/B/A/B against session 12 call g's
# binary (before MIN_CHUNK 512 -> 128 and the merge cost in the wave model).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s13m; mkdir -p $O
date -u +%FT%TZ
for b in flexkern_s12g flexkern flexkern_s12g flexkern; do
  echo "-- $b"; timeout 120 ./$b bench attn --device cuda --only decode > $O/d.txt 2>&1; grep -E "^decode" $O/d.txt | sed 's/  */ /g' | cut -d' ' -f2-4,7-9 ; grep -E "^  decode B1 L131072.*bf16 contiguous|^  decode B64 L8192 Hq9.*contiguous" $O/d.txt | cut -c1-160
done
