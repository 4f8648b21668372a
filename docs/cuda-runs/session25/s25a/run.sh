#!/bin/bash
# Session 25 call a (H200): three consumer warpgroups at D 64 (192-row tiles). Verify first
# (the new D 64 wave cases), then issue 15's D64 cases under: three groups (default), two
# groups, three + overlap, three + spills kept (no fallback to 64-key tiles), three + Q in
# registers; two rounds alternating; then the D64 peers.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s25a; mkdir -p $O
date -u +%FT%TZ
timeout 200 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo "verify rc=$?"
grep -E "FAIL|waves|^verify|modules" $O/verify.txt | cut -c1-160 | head -30
date -u +%FT%TZ
arm() { local l=$1; shift
  env "$@" timeout 60 ./flexkern bench attn --device cuda --only "S4096 D64" > $O/a.txt 2>&1
  echo "== $l" >> $O/all.txt; cat $O/a.txt >> $O/all.txt
  echo "$l: $(grep -E '^prefill' $O/a.txt | awk '{printf "%.0f|", $(NF-5)/1000}')"
}
for r in 1 2; do
  arm g3 X=1
  arm g2 FLEXKERN_CUDA_WG_GROUPS=2
  arm g3o FLEXKERN_CUDA_WG_OVERLAP=1
  arm g3spill FLEXKERN_CUDA_WG_SPILLS=1
  arm g3ospill FLEXKERN_CUDA_WG_OVERLAP=1 FLEXKERN_CUDA_WG_SPILLS=1
  arm g3s0 FLEXKERN_CUDA_WG_S=0
done
grep -E "^prefill" $O/a.txt | cut -c1-60
date -u +%FT%TZ
PYTHONUNBUFFERED=1 timeout 120 python3 prefill_peers_cuda.py --d64 > $O/peers.txt 2>&1; echo "peers rc=$?"
grep -E "matmul|flex|cudnn" $O/peers.txt | cut -c1-120
date -u +%FT%TZ
