#!/usr/bin/env bash
# One GPU verification run (issue 47), most important first, each step with its own time limit:
#   step               limit  checks
#   machine              15s  nvidia-smi, clocks, torch/CUDA/triton versions, the plugin's NVML probe
#   cuda_tests           95s  tests/cuda on the current core (timing, graphs, L2, memory, NVML, end to end)
#   compare_ref          70s  compare-ref on CUDA, zygote-forked workers: unchanged passes, +5% kernel chain
#                             caught and confirmed, no CUDA error from a fork (benchmarks/gpu_checks.py)
#   benchmark_fixture    35s  the `benchmark` fixture on CUDA, one function calling torch.cuda.synchronize()
#   history              25s  a run recorded with --gpuperf-history into SQLite; the stored GPU environment
#   device_state         25s  a bf16 8192^3 matmul with --gpuperf-energy: SM clock, power, temperature and
#                             clock-event reasons beside every sample and plausible, energy per call within 10%
#                             of NVML's counter read around a loop of the same call, kept in the history and
#                             drawn in the HTML report (gpu_checks.py device_state)
#   why_cuda             55s  benchmarks/why_quality.py --cases cuda: planted cuBLAS-path, extra-launch, Triton
#                             and host-only regressions named right, device and host time apart
#   fidelity             50s  benchmarks/gpu_fidelity.py --max-time 1.5: runner vs CUPTI kernel times, large
#                             kernels (>= 0.5 ms) within 1.5%, the others stated (gpu_checks.py fidelity)
#   examples_record      75s  examples/ recorded as this GPU's baselines (--gpuperf-max-time=1 in all three)
#   examples_rerun       40s  rerun unchanged: no false alarm
#   examples_planted     40s  planted AMP, checkpointing and kernel regressions: each caught
#   full_suite     optional  the CPU suite with CUDA visible, only in what is left (at least 60s); cut at
#                             its limit it says "partial", not FAILED (FULL_SUITE=0 leaves it out)
# The limits add up to 525s inside BUDGET (default 540s, about 9 minutes), which leaves a 10-minute
# command room for the wheels' install and the archive; a step that ends early leaves its time to
# the later ones, and a step is cut to what is left of the budget. A failing step does not stop
# the later ones. Each step ends with one line: its name, ok or FAILED, and its figure (the log's
# last "figure: " line, else its last line); the lines are repeated at the end (and written to
# $OUT/summary.txt), and the exit status says whether any failed. Logs and results go to
# $OUT/gpu-run.tgz (default OUT=./gpu-out), refreshed after every step. Without CUDA the steps that
# need it say "skipped, no CUDA" and do not fail; tests/cuda and why_quality still run (they skip
# their CUDA parts themselves).
#
# A GPU machine without a package index: first, where pip reaches one and the project's venv is
# set up, `PYTHON=.venv/bin/python bash benchmarks/gpu_session.sh --wheels` puts into WHEELS
# (default .whl, git-ignored) the project's own wheel and the runtime dependencies a torch image
# lacks (DEVICE_PACKAGES, at the venv's versions, for CPython WHEEL_PYTHON, default 3.12; psycopg
# only for the test suite's conftest). Carry that folder along; the run installs it into SITE
# (default /tmp/gpuperf-site) before the steps, with the checkout ahead of it on PYTHONPATH (the
# wheel brings the pytest plugin's entry point).
set -uo pipefail
OUT=${OUT:-gpu-out}
BUDGET=${BUDGET:-540}
WHEELS=${WHEELS:-.whl}
SITE=${SITE:-/tmp/gpuperf-site}
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
DEVICE_PACKAGES=${DEVICE_PACKAGES:-"jsonschema jsonschema-specifications referencing rpds-py GitPython gitdb smmap nvtx \
SQLAlchemy alembic Mako psycopg psycopg-binary"}

if [ "${1:-}" = --wheels ]; then
    # shellcheck disable=SC2086  # DEVICE_PACKAGES is a list of names
    pins=$("$PY" -c 'import importlib.metadata as m, sys; print(*(f"{n}=={m.version(n)}" for n in sys.argv[1:]))' \
        $DEVICE_PACKAGES) || exit 2
    rm -rf "$WHEELS" && mkdir -p "$WHEELS"
    # shellcheck disable=SC2086
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "${WHEEL_PYTHON:-3.12}" \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d "$WHEELS" $pins || exit 2
    "$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$WHEELS" . || exit 2
    echo "wheels: $(ls "$WHEELS" | wc -l) in $WHEELS ($(du -sh "$WHEELS" | cut -f1)): carry it along"
    exit 0
fi
if compgen -G "$WHEELS/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
        "$WHEELS"/*.whl || { echo "wheels: could not install $WHEELS into $SITE"; exit 2; }
    export PYTHONPATH="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}"
    echo "wheels: $(ls "$WHEELS"/*.whl | wc -l) installed from $WHEELS into $SITE"
fi
RUN=$(mktemp -d /tmp/gpu-run.XXXX)
mkdir -p "$OUT"
status=0
summary=()
CUDA=$("$PY" -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo 0)

said() {  # said LINE: a step's one line, now and in the summary at the end
    echo "$1"
    summary+=("$1")
}

step() {  # step NAME SECONDS COMMAND...
    local name=$1 limit=$2
    shift 2
    local left=$((BUDGET - SECONDS - 15))
    [ "$limit" -le "$left" ] || limit=$left
    if [ "$limit" -le 5 ]; then
        said "$name: FAILED, skipped: no time left in the budget of ${BUDGET}s"
        status=1
        return
    fi
    echo "=== $name (limit ${limit}s) ==="
    local t0=$SECONDS
    timeout "$limit" "$@" >"$RUN/$name.log" 2>&1
    local rc=$?
    tail -n "${TAIL_LINES:-25}" "$RUN/$name.log"
    local figure
    figure=$(grep '^figure: ' "$RUN/$name.log" | tail -n 1 | cut -c9-)
    # else the last line, without pytest's rules: "19 skipped in 0.91s"
    [ -n "$figure" ] || figure=$(grep -v '^[[:space:]]*$' "$RUN/$name.log" | tail -n 1 | sed 's/^[= ]*//; s/[= ]*$//')
    local verdict=ok
    if [ "$rc" -eq 124 ] && [ "${PARTIAL_OK:-0}" = 1 ]; then
        verdict=partial  # an optional step cut at its limit: what it got through is in its log
    elif [ "$rc" -ne 0 ]; then
        verdict=FAILED
        status=1
    fi
    [ "$rc" -ne 124 ] || figure="stopped at its limit of ${limit}s; $figure"
    said "$name: $verdict (exit $rc, $((SECONDS - t0))s): $figure"
    tar czf "$OUT/gpu-run.tgz" -C "$RUN" .
}

gpu_step() {  # gpu_step NAME SECONDS COMMAND...: a step that needs CUDA
    if [ "$CUDA" = 1 ]; then
        step "$@"
    else
        said "$1: skipped, no CUDA (torch.cuda.is_available() is False)"
    fi
}

optional_step() {  # optional_step NAME COMMAND...: runs in what is left of the budget, if 60s or more
    local name=$1 left=$((BUDGET - SECONDS - 15))
    shift
    if [ "$CUDA" != 1 ]; then
        said "$name: skipped, no CUDA (torch.cuda.is_available() is False)"
    elif [ "$left" -lt 60 ]; then
        said "$name: skipped, optional: ${left}s left in the budget of ${BUDGET}s"
    else
        PARTIAL_OK=1 step "$name" "$left" "$@"
    fi
}

CHECKS=("$PY" benchmarks/gpu_checks.py --out "$RUN")
gpu_step machine 15 bash -c "nvidia-smi; nvidia-smi -q -d CLOCK,PERFORMANCE | head -60; ${CHECKS[*]} machine"
# --confcutdir: tests/conftest.py imports the PostgreSQL harness (psycopg), which tests/cuda does not use
step cuda_tests 95 "$PY" -m pytest tests/cuda -v -rs -p no:cacheprovider --confcutdir=tests/cuda
gpu_step compare_ref 70 "${CHECKS[@]}" compare_ref --timeout 65
gpu_step benchmark_fixture 35 "${CHECKS[@]}" benchmark --timeout 30
gpu_step history 25 "${CHECKS[@]}" history --timeout 20
gpu_step device_state 25 "${CHECKS[@]}" device_state --timeout 22
step why_cuda 55 "$PY" benchmarks/why_quality.py --cases cuda --cuda-trials 2 --json "$RUN/why_cuda.json"
gpu_step fidelity 50 bash -c "$PY benchmarks/gpu_fidelity.py --max-time 1.5 --json $RUN/fidelity.json && \
    $PY benchmarks/gpu_checks.py fidelity --json $RUN/fidelity.json --out $RUN"
if [ "${EXAMPLES:-1}" = 1 ]; then
# --gpuperf-max-time=1 (default 2): the examples' 18 measurements and a torch.compile fit their limits
gpu_step examples_record 75 "$PY" -m pytest examples --gpuperf --gpuperf-update-baseline -p no:cacheprovider -q \
    --gpuperf-max-time=1 \
    --gpuperf-json="$RUN/examples_record.json"
gpu_step examples_rerun 40 "$PY" -m pytest examples --gpuperf -p no:cacheprovider -q -rs --gpuperf-max-time=1 \
    --gpuperf-json="$RUN/examples_rerun.json" --gpuperf-markdown="$RUN/examples_rerun.md"
[ "$CUDA" = 1 ] && tar czf "$RUN/baselines.tgz" baselines
# Planted regressions against the baselines just recorded: each must fail its test (exit 1).
gpu_step examples_planted 40 bash -c "GPUPERF_EXAMPLES_PLANT=slow_amp,no_checkpoint,slow_kernel \
    $PY -m pytest examples/test_amp.py examples/test_checkpointing.py examples/test_kernels.py \
    --gpuperf --gpuperf-max-time=1 -p no:cacheprovider -q -rf; test \$? -eq 1"
fi
if [ "${FULL_SUITE:-1}" = 1 ]; then
    # pytest-benchmark warns that xdist disables its benchmarks; the suite turns warnings into errors
    # -v -rfE: the log names every outcome as it comes, so a run cut off at its limit still says which failed
    optional_step full_suite "$PY" -m pytest tests -v -rfE -n 12 -p no:cacheprovider --ignore=tests/cuda \
        -W "ignore::pytest_benchmark.logger.PytestBenchmarkWarning" ${SUITE_ARGS:-}
fi
tar czf "$OUT/gpu-run.tgz" -C "$RUN" .
echo "=== summary (${SECONDS}s; logs and results in $OUT/gpu-run.tgz) ==="
printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
exit $status
