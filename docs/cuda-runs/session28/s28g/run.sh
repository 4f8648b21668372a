#!/bin/bash
# Session 28 call g (the closing binary e801eaf): where a short-context decode attention block's
# ~5 us go. ncu --set full on one fk_attention_mma launch of the SmolLM2 synth's decode (eager
# steps), and the same with the 8B Q4_0 synth.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s28g; mkdir -p $O
date -u +%FT%TZ
timeout 30 ./flexkern synth-model --shape smollm2-135m --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/s.gguf > /dev/null 2>&1; echo "synth smollm2 rc=$?"
(timeout 120 ./flexkern synth-model --shape llama3-8b --format q4_0 --tokenizer bytes --vocab 49152 --out /tmp/q4_0.gguf > /dev/null 2>&1; echo "synth 8b rc=$?") > $O/synth.log 2>&1 &
S="The three laws of robotics are"
timeout 30 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$S" -n 8 --temperature 0 --ctx 160 > /dev/null 2>&1
FLEXKERN_CUDA_GRAPH=0 timeout 150 ncu --set full --import-source no -k regex:fk_attention_mma --launch-skip 100 --launch-count 1 ./flexkern run --device cuda --model /tmp/s.gguf --prompt "$S" -n 8 --temperature 0 --ctx 160 > $O/ncu_smol.txt 2>&1; echo "ncu smol rc=$?"
grep -E "Duration|Elapsed Cycles|Executed Ipc|Issue Slots Busy|Registers|Block Size|Grid Size|Achieved Occupancy|Memory Throughput|L2 Hit|Stall|Warp Cycles Per|Executed Instructions  " $O/ncu_smol.txt | head -30
wait; cat $O/synth.log
timeout 30 ./flexkern run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 8 --temperature 0 --ctx 160 > /dev/null 2>&1
FLEXKERN_CUDA_GRAPH=0 timeout 150 ncu --set full --import-source no -k regex:fk_attention_mma --launch-skip 100 --launch-count 1 ./flexkern run --device cuda --model /tmp/q4_0.gguf --prompt "$S" -n 8 --temperature 0 --ctx 160 > $O/ncu_8b.txt 2>&1; echo "ncu 8b rc=$?"
grep -E "Duration|Executed Ipc|Issue Slots Busy|Grid Size|Warp Cycles Per|Executed Instructions  " $O/ncu_8b.txt | head -12
date -u +%FT%TZ
