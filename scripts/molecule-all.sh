#!/usr/bin/env bash
# Run every molecule scenario (default driver, no containers) against this checkout.
set -euo pipefail
export NO_COLOR=1 PY_COLORS=0
cd "$(dirname "$0")/.."
status=0
for dir in molecule/*/; do
  scenario=$(basename "$dir")
  [ -f "$dir/molecule.yml" ] || continue
  echo "== molecule test -s $scenario"
  # A scenario's ephemeral directory (~/.ansible/tmp/molecule.<hash>.<scenario>) outlives the run and is shared by
  # every checkout at the same path: start each scenario from an empty one (a stale render dir fails a converge).
  molecule reset -s "$scenario" >/dev/null 2>&1 || true
  molecule test -s "$scenario" || { echo "molecule scenario $scenario FAILED"; status=1; }
done
exit $status
