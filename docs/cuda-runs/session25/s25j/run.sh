#!/bin/bash
# Session 25 call j (H200): SmolLM2-shape Q4_0 decode (launch-bound; its GEMVs take the permuted
# Q8_0 codes) with call i's binary against HEAD-before-it's, alternating, three rounds.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s25j; mkdir -p $O
date -u +%FT%TZ
S="The three laws of robotics are"
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1
L=$O/runs.txt
for r in 1 2 3 4 5 6; do for b in flexkern flexkern_old; do
  timeout 40 ./$b run --device cuda --model /tmp/s.gguf --prompt "$S" -n 128 --temperature 0 --ctx 160 > $O/out.txt 2>> $L; echo "smollm2 $b rc=$? $(tail -c 300 $L | tr '\r' '\n' | grep -o 'decode:[^|]*' | tail -1) $(md5sum < $O/out.txt | cut -c1-8)"
done; done
date -u +%FT%TZ
