#!/bin/bash
# Session 35 call k: the studies build with their shared timing and copy-rate helpers
# (bench/micro/micro.cuh); side_stream runs once; memcheck on a short SmolLM2 Q4_0 run of the
# closing binary (s35h), its report kept.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/k; mkdir -p $O
B=../../../../.devcarry/s35h/flexkern
M=../../../../bench/micro
date -u +%FT%TZ
(timeout 150 $B synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1 &)
for p in side_stream read_ceiling gemv_chain decode_stream; do
  nvcc -O3 -std=c++17 -arch=sm_90a -o $O/$p $M/$p.cu -lcuda > $O/build_$p.log 2>&1; echo "build $p rc=$?"; tail -3 $O/build_$p.log
done
$O/side_stream > $O/side_stream.log 2>&1; echo "side_stream rc=$?"; head -4 $O/side_stream.log
rm -f $O/side_stream $O/read_ceiling $O/gemv_chain $O/decode_stream
sleep 5
timeout 120 compute-sanitizer --tool memcheck $B run --device cuda --model /tmp/s.gguf --prompt "The three laws of robotics are" -n 8 --temperature 0 --ctx 64 > $O/memcheck_run.log 2>&1; echo "memcheck run rc=$?"; grep -E "ERROR SUMMARY|decode" $O/memcheck_run.log | tail -3
date -u +%FT%TZ
