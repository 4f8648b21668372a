#!/bin/bash
# Session 15 call c (H100): three binaries. flexkern_hooks: branch-free score hooks, the Hopper
# kernel otherwise as in session 14 (mask-only variants compile to the same SASS). flexkern:
# the same plus the persistent Hopper prefill (a block per SM running its list of works).
# flexkern_old: session 14. verify both new binaries; bench prefill A/B/C twice; the peers.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s15c; mkdir -p $O
date -u +%FT%TZ
for b in flexkern flexkern_hooks; do
  echo "== verify $b"; timeout 300 ./$b verify --device cuda > $O/verify_$b.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify_$b.txt | head -8; tail -2 $O/verify_$b.txt
done
row() { grep -E "^(prefill|chunked)" $1 | awk '{n=NF; printf "%.0f|", $(n-5)/1000}'; echo; }
for r in 1 2; do for b in flexkern_hooks flexkern flexkern_old; do
  echo "== $b $r" >> $O/prefill_all.txt; timeout 150 ./$b bench attn --device cuda --only prefill > $O/p.txt 2>&1; cat $O/p.txt >> $O/prefill_all.txt
  echo "-- $b $r: $(row $O/p.txt)"
done; done
rm -f $O/p.txt
echo "== peers"; timeout 200 python3 prefill_peers_cuda.py > $O/peers.txt 2>&1; grep -E "matmul|flex " $O/peers.txt | awk '{print $(NF-2)}' | tr '\n' '|'; echo
date -u +%FT%TZ
