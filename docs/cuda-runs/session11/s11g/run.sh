#!/bin/bash
# Session 11 call g (H100): programmatic dependent launch for the small ops (rms_norm, rope, add,
# kv_write). verify, verify-model; decode A/B against call f's binary and FLEXKERN_CUDA_PDL=0.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s11g; mkdir -p $O
date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== verify"; timeout 170 ./flexkern verify --device cuda > $O/verify.txt 2>&1; echo rc=$?; grep -E " fail|FAIL" $O/verify.txt | head -20; tail -1 $O/verify.txt
P="The three laws of robotics are"
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
echo "== verify-model"; timeout 90 ./flexkern verify-model --device cuda --model /tmp/s.gguf > $O/vm.txt 2>&1; echo rc=$?; tail -1 $O/vm.txt
for s in smollm2-135m:q4_0 llama3-8b:q4_0; do
  shape=${s%%:*}; f=${s##*:}
  echo "== $shape $f"; timeout 60 ./flexkern synth-model --shape $shape --format $f --tokenizer bytes --vocab 49152 --out /tmp/m.gguf > $O/synth.txt 2>&1; echo rc=$?
  for b in flexkern flexkern_f; do timeout 60 ./$b run --device cuda --model /tmp/m.gguf --prompt "$P" -n 4 --temperature 0 --ctx 100 >/dev/null 2>&1; done
  for i in 1 2 3; do
    for v in "flexkern 1" "flexkern 0" "flexkern_f 1"; do set -- $v
      FLEXKERN_CUDA_PDL=$2 timeout 60 ./$1 run --device cuda --model /tmp/m.gguf --prompt "$P" -n 64 --temperature 0 --ctx 100 2>$O/r.txt >/dev/null; echo "$shape $f $1 pdl=$2 rc=$? $(grep -h decode $O/r.txt | tail -1 | cut -c1-70)"
    done
  done
done
