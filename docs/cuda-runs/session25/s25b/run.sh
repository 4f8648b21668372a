#!/bin/bash
# Session 25 call b (H200): three warpgroups where the BlockMask prices them cheaper, overlap
# on with three, the window's whole tiles found at any offset. Verify; issue 15's D64 cases
# under the planner's choice, forced two and forced three groups, alternating; the whole
# prefill bench once; the D64 peers.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s25b; mkdir -p $O
date -u +%FT%TZ
timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"
grep -E "FAIL|^verify|modules" $O/verify.txt | cut -c1-160 | head -20
date -u +%FT%TZ
arm() { local l=$1; shift
  env "$@" timeout 60 ./flexkern bench attn --device cuda --only "S4096 D64" > $O/a.txt 2>&1
  echo "== $l" >> $O/all.txt; cat $O/a.txt >> $O/all.txt
  echo "$l: $(grep -E '^prefill' $O/a.txt | awk '{printf "%.0f|", $(NF-5)/1000}')"
}
for r in 1 2; do
  arm plan X=1
  arm g2 FLEXKERN_CUDA_WG_GROUPS=2
  arm g3 FLEXKERN_CUDA_WG_GROUPS=3
  arm g3nover FLEXKERN_CUDA_WG_GROUPS=3 FLEXKERN_CUDA_WG_OVERLAP=0
done
date -u +%FT%TZ
timeout 90 ./flexkern bench attn --device cuda --only prefill > $O/prefill.txt 2>&1; echo "prefill rc=$?"
grep -E "^(prefill|chunked)" $O/prefill.txt | cut -c1-120
date -u +%FT%TZ
PYTHONUNBUFFERED=1 timeout 120 python3 prefill_peers_cuda.py --d64 > $O/peers.txt 2>&1; echo "peers rc=$?"
grep -E "matmul|flex|cudnn" $O/peers.txt | cut -c1-120
date -u +%FT%TZ
