#!/bin/bash
# Session 15 call i (H100): masks that read captures (documents) back on their session-14 code
# (guarded capture loads, 64-bit hook integers: SASS identical to session 14's), A/B against
# call h's binary (6e4728a). verify; bench prefill twice each, alternating.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s15i; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 300 ./flexkern verify --device cuda > $O/verify.txt 2>&1; rc=$?; echo rc=$rc; grep -E " fail|FAIL" $O/verify.txt | head -8; tail -2 $O/verify.txt
if [ $rc != 0 ]; then exit 0; fi
row() { grep -E "^(prefill|chunked)" $1 | awk '{n=NF; printf "%.0f|", $(n-5)/1000}'; echo; }
for r in 1 2; do for b in flexkern flexkern_h; do
  echo "== $b $r" >> $O/prefill_all.txt; timeout 150 ./$b bench attn --device cuda --only prefill > $O/p.txt 2>&1; cat $O/p.txt >> $O/prefill_all.txt
  echo "-- $b $r: $(row $O/p.txt)"
done; done
rm -f $O/p.txt
date -u +%FT%TZ
