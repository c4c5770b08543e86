#!/usr/bin/env bash
# The GPU check, run on a machine with a GPU and no network (the device tool's H200):
# build tinytorch with the machine's own toolchain, run the test suite with CUDA present, then the
# benchmarks beside PyTorch on the same GPU. Logs go to $OUT when set (else ./device_check_out).
#   bash benchmarks/device_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-device_check_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
status=0

step() {  # step NAME LIMIT_SECONDS COMMAND...: run, log to $OUT/NAME.log, remember a failure
  local name=$1 limit=$2; shift 2
  echo "=== $name: $*"
  timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  echo "=== $name: exit $rc"
  [ "$rc" -eq 0 ] || status=1
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$OUT/gpu.txt"
step build 300 python3 -m pip install --no-build-isolation --no-deps -q .
# Run from a copy-free place so the installed package (not the source tree) is imported.
export TINYTORCH_TEST_DEVICE=cuda
step tests 420 python3 -m pytest -q -p no:cacheprovider --rootdir=. tests
for b in autograd_overhead train_step collectives; do
  [ -f "benchmarks/$b.py" ] && step "bench_$b" 240 python3 "benchmarks/$b.py" --device cuda --json "$OUT/$b.json"
done
# ZeRO on the GPU: the FSDP tests ran in the suite above (test_fsdp.py's CUDA case); W6's memory with the
# model on the device (ranks share the one GPU over the ring backend).
step bench_zero_w6 300 python3 benchmarks/zero.py --what memory --ranks 2 --device cuda --out "$OUT/zero_w6_cuda.json"
# The harness on the GPU (one GPU: NCCL at one rank exercises the path; two ranks share it over the ring).
step bench_collectives_nccl 120 python3 -m tinytorch.bench collectives --nproc 1 --backend nccl --op all_reduce,all_gather,reduce_scatter --min-bytes 1M --max-bytes 64M --json "$OUT/collectives_nccl.json"
step bench_train_cuda 300 python3 -m tinytorch.bench train --nproc 1 --model W3 --strategy none --device cuda --steps 8 --json "$OUT/train_cuda.json"
echo "device_check: $([ $status -eq 0 ] && echo PASSED || echo FAILED) (logs in $OUT)"
exit $status
