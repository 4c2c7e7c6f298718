# Sourced by the interop setup scripts: one pinned Python venv per suite.
#
#   pinned_venv VENV REQUIREMENTS NAME IMPORT_CHECK [PIP_ARGS...]
#
# Creates VENV (with $PYTHON, default python3) and installs REQUIREMENTS with
# pip (plus PIP_ARGS), then runs IMPORT_CHECK in it. Idempotent: a venv whose
# recorded requirements hash (stamp .lakegate-NAME-requirements) matches is
# left as is. Writes only to stderr, so callers can print the venv's python
# as their last line.
pinned_venv() {
  local venv="$1" req="$2" name="$3" check="$4"
  shift 4
  local python="${PYTHON:-python3}"
  local want stamp
  want="$(sha256sum "$req" | cut -d' ' -f1)"
  stamp="$venv/.lakegate-$name-requirements"
  if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "setup: $venv is up to date" >&2
    return 0
  fi
  if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv" >&2
  fi
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@" -r "$req" >&2
  "$venv/bin/python" -c "$check" >&2
  echo "$want" > "$stamp"
}
