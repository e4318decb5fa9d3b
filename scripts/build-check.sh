#!/usr/bin/env bash
# Build the collection tarball and check every plugin renders with ansible-doc.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
ansible-galaxy collection build --force --output-path "$out" . >/dev/null
ls "$out"/gpufleet-serving-*.tar.gz >/dev/null
echo "built $(basename "$out"/gpufleet-serving-*.tar.gz)"
for f in plugins/modules/*.py; do
  name=$(basename "$f" .py)
  ansible-doc -t module "gpufleet.serving.$name" >/dev/null
  echo "ansible-doc module gpufleet.serving.$name: ok"
done
# One YAML doc sidecar per filter (a .py file may hold several filters).
for f in plugins/filter/*.yml; do
  [ -e "$f" ] || continue
  name=$(basename "$f" .yml)
  ansible-doc -t filter "gpufleet.serving.$name" >/dev/null
  echo "ansible-doc filter gpufleet.serving.$name: ok"
done
for r in roles/*/; do
  [ -d "$r/meta" ] || continue
  name=$(basename "$r")
  ansible-doc -t role "gpufleet.serving.$name" >/dev/null
  echo "ansible-doc role gpufleet.serving.$name: ok"
done
antsibull-changelog lint
