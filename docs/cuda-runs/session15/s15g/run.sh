#!/bin/bash
# Session 15 call g (H100): compute-sanitizer memcheck on verify --quick with the closing binary
# (the Hopper kernel's hooks now read captures at index 0 when out of range, and edge tiles
# evaluate the hooks for every element).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH FLEXKERN_CACHE_DIR=$PWD/fkcache PATH=$PATH:/usr/local/cuda-13.0/bin
O=$OUT/s15g; mkdir -p $O
date -u +%FT%TZ
echo "== warm the kernel cache"; timeout 150 ./flexkern verify --device cuda --quick > $O/verify_quick.txt 2>&1; echo rc=$?; tail -1 $O/verify_quick.txt
echo "== memcheck verify --quick"; timeout 400 compute-sanitizer --tool memcheck --print-limit 5 ./flexkern verify --device cuda --quick > $O/memcheck.txt 2>&1; echo rc=$?; grep -E "ERROR SUMMARY|^verify:" $O/memcheck.txt | head -3
head -60 $O/memcheck.txt > $O/memcheck_head.txt; tail -40 $O/memcheck.txt > $O/memcheck_tail.txt; rm -f $O/memcheck.txt
date -u +%FT%TZ
