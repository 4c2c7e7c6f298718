#!/usr/bin/env bash
# Self-test of gotest.sh's go_test_pass (run by `make test`): a failure
# outside the named tests (the binary exiting non-zero after they passed, as
# a race report at exit does), a failing named test, and a named test that
# does not exist must each fail it; a passing run must pass.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
# shellcheck source=gotest.sh
. e2e/interop/gotest.sh
pkg=./e2e/interop/testdata/gotestexit
bad=0
expect() { # expect pass|fail DESCRIPTION -- command...
  local want="$1" what="$2"
  shift 3
  local got=pass
  "$@" >/dev/null 2>&1 || got=fail
  if [[ $got != "$want" ]]; then
    echo "gotest selftest: $what: go_test_pass should $want, it did $got" >&2
    bad=1
  fi
}
expect pass "passing tests" -- go_test_pass "$pkg" TestPasses TestFailsOnRequest -- -count=1
expect fail "binary failing after the named tests passed" -- \
  env GOTESTEXIT_FAIL_AFTER=1 bash -c ". e2e/interop/gotest.sh; go_test_pass $pkg TestPasses -- -count=1"
expect fail "a named test failing" -- \
  env GOTESTEXIT_FAIL_TEST=1 bash -c ". e2e/interop/gotest.sh; go_test_pass $pkg TestFailsOnRequest -- -count=1"
expect fail "a named test that does not exist" -- go_test_pass "$pkg" TestNoSuchTest -- -count=1
# Under errexit, as the run scripts call it: a failure must still be seen.
expect fail "under set -e" -- \
  env GOTESTEXIT_FAIL_AFTER=1 bash -c "set -euo pipefail; . e2e/interop/gotest.sh; go_test_pass $pkg TestPasses -- -count=1; echo unreachable-if-failed >&2; exit 0"
if ((bad)); then exit 1; fi
echo "gotest selftest: ok"
