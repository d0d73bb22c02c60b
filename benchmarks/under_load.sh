#!/usr/bin/env bash
# The tests beside a CPU load: `stress-ng --cpu N` (Debian: apt install stress-ng) keeps N
# cores busy while pytest runs, and no test may fail. A test that fails here waits on a
# tight deadline: its waits belong in tests/support/timing.py (`scaled`, `wait_until`).
#
#     benchmarks/under_load.sh [PYTEST_ARGS...]
#
# Without arguments: the two Ctrl-C tests that failed under load, then the unit tier.
# STRESS_CPUS (default 2) workers; BRINGUP_TEST_TIME_SCALE (default 1, as in CI) multiplies
# every deadline the tests wait on; SEED (default: drawn, printed) the random order of the
# tests (pytest-randomly; `--randomly-seed=N` among the arguments wins). The load ends with
# the script, whatever happened.
set -uo pipefail
cd "$(dirname "$0")/.."

if ! command -v stress-ng >/dev/null; then
    echo "under_load.sh: needs stress-ng (apt install stress-ng)" >&2
    exit 2
fi
if [ $# -eq 0 ]; then
    set -- \
        tests/integration/ssh/test_ssh_fleet.py::test_ctrl_c_stops_cleanly_and_keeps_every_record \
        tests/integration/slurm/test_check_slurm.py::test_ctrl_c_ends_every_step_and_releases_the_job \
        tests/unit
fi

stress-ng --cpu "${STRESS_CPUS:-2}" --quiet &
stress=$!
trap 'kill "$stress" 2>/dev/null; wait "$stress" 2>/dev/null' EXIT
seed=${SEED:-$(( (RANDOM << 15 | RANDOM) + 1 ))}
echo "under_load.sh: stress-ng --cpu ${STRESS_CPUS:-2} (pid $stress)," \
    "BRINGUP_TEST_TIME_SCALE=${BRINGUP_TEST_TIME_SCALE:-1}, test order seed $seed (SEED=$seed)"
start=$(date +%s)
.venv/bin/pytest -q -p no:cacheprovider -p randomly --randomly-seed="$seed" --durations=10 "$@"
status=$?
echo "under_load.sh: pytest exit $status after $(( $(date +%s) - start )) s under load"
exit $status
