#!/bin/bash
# Session 15 call f (H100): the closing binary. Branch-free edge tiles for strided K/V only
# (paged keeps its call-c code: call e measured chunked paged 6 % slower), ints narrowed there
# only. verify; verify-model (SmolLM2 Q4_0: its prompt runs the Hopper kernel); bench prefill
# A/B twice against flexkern_hooks (69ff765); the peers; bench attn --only decode.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s15f; mkdir -p $O
date -u +%FT%TZ
echo "== verify"; timeout 300 ./flexkern verify --device cuda > $O/verify.txt 2>&1; rc=$?; echo rc=$rc; grep -E " fail|FAIL" $O/verify.txt | head -8; tail -2 $O/verify.txt
if [ $rc != 0 ]; then exit 0; fi
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
for p in precise default; do echo "== verify-model $p" >> $O/vm.txt; timeout 90 ./flexkern verify-model --device cuda --gpu-path $p --model /tmp/s.gguf --tokens 64 >> $O/vm.txt 2>&1; echo "verify-model $p rc=$?: $(tail -1 $O/vm.txt)"; done
row() { grep -E "^(prefill|chunked)" $1 | awk '{n=NF; printf "%.0f|", $(n-5)/1000}'; echo; }
for r in 1 2; do for b in flexkern flexkern_hooks; do
  echo "== $b $r" >> $O/prefill_all.txt; timeout 150 ./$b bench attn --device cuda --only prefill > $O/p.txt 2>&1; cat $O/p.txt >> $O/prefill_all.txt
  echo "-- $b $r: $(row $O/p.txt)"
done; done
rm -f $O/p.txt
echo "== peers"; timeout 200 python3 prefill_peers_cuda.py > $O/peers.txt 2>&1; grep -E "matmul|flex " $O/peers.txt | awk '{print $(NF-1)}' | tr '\n' '|'; echo
echo "== decode"; timeout 120 ./flexkern bench attn --device cuda --only decode > $O/decode.txt 2>&1; grep -E "^  |copy" $O/decode.txt | cut -c1-60 | head -3; grep -E "^(decode|B[0-9])" $O/decode.txt | head -12
date -u +%FT%TZ
