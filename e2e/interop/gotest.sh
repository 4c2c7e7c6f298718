# Sourced by the interop run scripts: runs Go tests that must really run.
#
#   go_test_pass PKG TEST [TEST...] [-- GO_TEST_FLAGS...]
#
# Runs `go test -json -run '^(TEST|TEST...)$' GO_TEST_FLAGS PKG`, prints the
# tests' output as `go test -v` would, and returns non-zero unless go test
# succeeded AND every named TEST reported a "pass" action. A test that
# skipped (an environment variable or a tool missing), or that matched
# nothing (renamed, moved to another package), fails the script instead of
# passing silently.
go_test_pass() {
  local pkg="$1"
  shift
  local tests=()
  while [[ $# -gt 0 && $1 != "--" ]]; do
    tests+=("$1")
    shift
  done
  [[ ${1:-} == "--" ]] && shift
  if [[ ${#tests[@]} -eq 0 ]]; then
    echo "go_test_pass: no test named" >&2
    return 2
  fi
  local re
  re="^($(IFS='|'; echo "${tests[*]}"))\$"
  # The exit statuses of both sides of the pipe are read from PIPESTATUS
  # right after it: with errexit off for the pipe alone (the caller's
  # setting restored), so neither status is lost to an assignment.
  local errexit=0
  [[ $- == *e* ]] && errexit=1
  set +e
  go test -json -run "$re" "$@" "$pkg" | python3 -c '
import json, sys
want = sys.argv[1:]
got = {}
for line in sys.stdin:
    try:
        ev = json.loads(line)
    except ValueError:
        sys.stdout.write(line)  # build errors and the like
        continue
    if ev.get("Action") == "output":
        sys.stdout.write(ev.get("Output", ""))
    elif ev.get("Action") in ("pass", "fail", "skip") and ev.get("Test") in want:
        got[ev["Test"]] = ev["Action"]
    sys.stdout.flush()
bad = [t for t in want if got.get(t) != "pass"]
for t in bad:
    print("go_test_pass: %s: %s" % (t, got.get(t, "did not run (no such test?)")), file=sys.stderr)
sys.exit(1 if bad else 0)
' "${tests[@]}"
  local statuses=("${PIPESTATUS[@]}")
  ((errexit)) && set -e
  local go_st=${statuses[0]} st=${statuses[1]}
  if [[ $go_st -ne 0 ]]; then
    echo "go_test_pass: go test $pkg exited with status $go_st" >&2
    return "$go_st"
  fi
  return "$st"
}
