#!/bin/bash
# Session 15 call a (H100): branch-free score hooks (fast tanh, hoisted reciprocal, small-int
# conversion) and the persistent Hopper prefill kernel. verify (with the new many-works cases);
# bench attn --only prefill A/B/A/B against the session-14 binary; the peers.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s15a; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 300 ./flexkern verify --device cuda > $O/verify.txt 2>&1; rc=$?; echo rc=$rc; grep -E " fail|FAIL|persistent" $O/verify.txt | head -14; tail -2 $O/verify.txt
if [ $rc != 0 ]; then exit 0; fi
for r in 1 2; do for b in flexkern flexkern_old; do
  echo "-- $b $r"; timeout 150 ./$b bench attn --device cuda --only prefill > $O/prefill_${b}_$r.txt 2>&1; grep -E "^(prefill|chunked)" $O/prefill_${b}_$r.txt | awk '{n=NF; printf "%s %s|", $(n-5), $(n-4)}'; echo
done; done
grep -E "works on" $O/prefill_flexkern_1.txt | head -3
echo "== peers"; timeout 200 python3 prefill_peers_cuda.py > $O/peers.txt 2>&1; grep -E "matmul|flex " $O/peers.txt | awk '{print $(NF-2), $(NF-1)}' | tr '\n' '|'; echo
date -u +%FT%TZ
