#!/bin/bash
# Session 25 call e (H200): the D64 prefill cases under forced two and three warpgroups (the
# groups model's calibration), two rounds alternating; compute-sanitizer memcheck over verify
# --quick (the three-warpgroup kernel in its D64 wave cases); the decode bench and its peers;
# a SmolLM2-shape prompt of ~600 rows (three warpgroups) against session 24's binary.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s25e; mkdir -p $O
date -u +%FT%TZ
arm() { local l=$1; shift
  env "$@" timeout 60 ./flexkern bench attn --device cuda --only "S4096 D64" > $O/a.txt 2>&1
  echo "== $l" >> $O/all.txt; cat $O/a.txt >> $O/all.txt
  echo "$l: $(grep -E '^prefill' $O/a.txt | awk '{printf "%.0f|", $(NF-5)/1000}')"
}
for r in 1 2; do
  arm g2 FLEXKERN_CUDA_WG_GROUPS=2
  arm g3 FLEXKERN_CUDA_WG_GROUPS=3
done
date -u +%FT%TZ
timeout 240 compute-sanitizer --tool memcheck ./flexkern verify --device cuda --quick > $O/memcheck.txt 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.txt | tail -3
date -u +%FT%TZ
timeout 60 ./flexkern bench attn --device cuda --only decode > $O/decode.txt 2>&1; echo "decode rc=$?"
PYTHONUNBUFFERED=1 timeout 110 python3 attention_peers_cuda.py > $O/peers.txt 2>&1; echo "peers rc=$?"
date -u +%FT%TZ
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
P="$(python3 -c "print(' '.join(['The three laws of robotics are a set of rules devised by Isaac Asimov.'] * 8))")"
for b in flexkern flexkern_s24; do
  timeout 60 ./$b run --device cuda --model /tmp/s.gguf --prompt "$P" -n 32 --temperature 0 --ctx 1024 > $O/text_$b.txt 2> $O/run_$b.txt; echo "$b rc=$? md5 $(md5sum < $O/text_$b.txt | cut -c1-8) $(tail -c 300 $O/run_$b.txt | tr '\r' '\n' | grep -o 'prefill:[^|]*' | tail -1)"
done
date -u +%FT%TZ
grep -E "copy|^decode" $O/decode.txt | cut -c1-150
grep -E "copy|sdpa|flex" $O/peers.txt | cut -c1-140 | head -30
