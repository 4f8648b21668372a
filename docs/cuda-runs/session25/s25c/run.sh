#!/bin/bash
# Session 25 call c (H200): a cut tile's scores without the key checks where every key exists
# (a uniform branch), overlap off up front for three warpgroups with hooks. Verify; then the
# prefill bench (D128 and D64) with this binary against call b's, alternating, two rounds.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s25c; mkdir -p $O
date -u +%FT%TZ
timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.txt | cut -c1-160 | head -20
date -u +%FT%TZ
arm() { local l=$1 b=$2
  timeout 90 ./$b bench attn --device cuda --only prefill > $O/a.txt 2>&1
  echo "== $l" >> $O/all.txt; cat $O/a.txt >> $O/all.txt
  echo "$l: $(grep -E '^prefill' $O/a.txt | awk '{printf "%.0f|", $(NF-5)/1000}')"
}
for r in 1 2; do
  arm new flexkern
  arm callb flexkern_b
done
date -u +%FT%TZ
