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
  molecule test -s "$scenario" || { echo "molecule scenario $scenario FAILED"; status=1; }
done
exit $status
