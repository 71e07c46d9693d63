#!/usr/bin/env bash
# One GPU verification run, in the order the figures in docs/gpu.md came from:
#   1. the machine (nvidia-smi, torch, NVML as the plugin reads it)
#   2. tests/cuda (unit and end-to-end tests that need a GPU)
#   3. benchmarks/gpu_fidelity.py (runner vs CUPTI vs triton do_bench; graph vs eager)
#   4. examples/ with --gpuperf: record baselines for this GPU, then rerun against them
#   5. the whole test suite with CUDA visible (what changes when auto picks a GPU)
# Logs and results go to $OUT/gpu-run.tgz (default OUT=./gpu-out), refreshed after every step.
# Each step has its own time limit, capped so the whole run ends within BUDGET seconds
# (default 570), and a failing step does not stop the later ones; the exit status says
# whether any failed.
set -uo pipefail
OUT=${OUT:-gpu-out}
BUDGET=${BUDGET:-570}
RUN=$(mktemp -d /tmp/gpu-run.XXXX)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
status=0

step() {  # step NAME SECONDS COMMAND...
    local name=$1 limit=$2
    shift 2
    local left=$((BUDGET - SECONDS - 15))
    [ "$limit" -le "$left" ] || limit=$left
    if [ "$limit" -le 5 ]; then
        echo "=== $name: skipped, no time left ==="
        status=1
        return
    fi
    echo "=== $name (limit ${limit}s) ==="
    local t0=$SECONDS
    timeout "$limit" "$@" >"$RUN/$name.log" 2>&1
    local rc=$?
    tail -n "${TAIL_LINES:-25}" "$RUN/$name.log"
    echo "=== $name: exit $rc after $((SECONDS - t0))s ==="
    [ "$rc" -eq 0 ] || status=1
    tar czf "$OUT/gpu-run.tgz" -C "$RUN" .
}

step machine 60 bash -c "nvidia-smi; nvidia-smi -q -d CLOCK,PERFORMANCE | head -60; $PY -c 'import torch, triton; print(torch.__version__, torch.version.cuda, triton.__version__, torch.cuda.get_device_name())'"
step cuda_tests 240 "$PY" -m pytest tests/cuda -v -rs -p no:cacheprovider
step fidelity 200 "$PY" benchmarks/gpu_fidelity.py --json "$RUN/fidelity.json"
if [ "${EXAMPLES:-1}" = 1 ]; then
step examples_record 300 "$PY" -m pytest examples --gpuperf --gpuperf-update-baseline -p no:cacheprovider -q \
    --gpuperf-json="$RUN/examples_record.json"
step examples_rerun 300 "$PY" -m pytest examples --gpuperf -p no:cacheprovider -q -rs \
    --gpuperf-json="$RUN/examples_rerun.json" --gpuperf-markdown="$RUN/examples_rerun.md"
tar czf "$RUN/baselines.tgz" baselines
# Planted regressions against the baselines just recorded: each must fail its test (exit 1).
step examples_planted 200 bash -c "GPUPERF_EXAMPLES_PLANT=slow_amp,no_checkpoint,slow_kernel \
    $PY -m pytest examples/test_amp.py examples/test_checkpointing.py examples/test_kernels.py \
    --gpuperf -p no:cacheprovider -q -rf; test \$? -eq 1"
fi
if [ "${FULL_SUITE:-1}" = 1 ]; then
    # pytest-benchmark warns that xdist disables its benchmarks; the suite turns warnings into errors
    # -v -rfE: the log names every outcome as it comes, so a run cut off at its limit still says which failed
    step full_suite "${SUITE_LIMIT:-400}" "$PY" -m pytest tests -v -rfE -n 12 -p no:cacheprovider --ignore=tests/cuda \
        -W "ignore::pytest_benchmark.logger.PytestBenchmarkWarning" ${SUITE_ARGS:-}
fi
tar czf "$OUT/gpu-run.tgz" -C "$RUN" .
exit $status
