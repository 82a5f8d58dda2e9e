#!/usr/bin/env bash
# One leg of `make test`: pytest over the tests MARKS selects, in two passes. First every test
# but the timed ones, in the workers XDIST names (pytest-xdist; empty: one process); then the
# timed ones (tests/conftest.py TIMED_TESTS: an outage answered within a second, nginx's added
# latency) alone in one process, because on a 2-core machine three other workers' load is enough
# to push a 0.4 s refusal past its 1 s bound, and a bound that holds only on an idle machine would
# be a flake, not a check. A pass that selects no test (pytest's exit status 5) is not a failure.
#   scripts/pytest_leg.sh PYTHON "MARKS" "XDIST" [pytest args...]
set -uo pipefail
python=$1 marks=$2 xdist=$3
shift 3
both() { if [ -n "$marks" ]; then echo "($marks) and $1"; else echo "$1"; fi; }
# shellcheck disable=SC2086  # XDIST is several words
"$python" -m pytest $xdist -m "$(both 'not timed')" "$@"
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 5 ]; then exit $rc; fi
"$python" -m pytest -m "$(both timed)" "$@"
rc=$?
if [ $rc -eq 5 ]; then exit 0; fi
exit $rc
