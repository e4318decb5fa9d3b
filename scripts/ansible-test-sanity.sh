#!/usr/bin/env bash
# Run `ansible-test sanity --venv` offline.
# - ansible-test must run from a path ending in ansible_collections/<ns>/<name>, so the collection is copied there
#   (without .venv/.git/outputs).
# - ansible-test bootstraps pip in its venvs with a get-pip script it downloads from a host unreachable here; a
#   stand-in that uses ensurepip is written to its cache first (see ../shared/environment.md).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
py="$top/.venv/bin/python"
at_dir=$("$py" -c 'import ansible_test, os; print(os.path.dirname(ansible_test.__file__))')
pip_ver=$(grep -oE "pip='[0-9.]+'" "$at_dir/_internal/python_requirements.py" | head -1 | cut -d"'" -f2)
cache="$HOME/.ansible/test/cache"
stand_in="$cache/get_pip_${pip_ver//./_}.py"
mkdir -p "$cache"
if [ ! -f "$stand_in" ]; then
  cat > "$stand_in" <<'PY'
# Offline stand-in for get-pip.py (written by gpufleet.serving's scripts/ansible-test-sanity.sh).
import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.run([sys.executable, "-m", "ensurepip", "--default-pip"], check=True)
if args:
    subprocess.run([sys.executable, "-m", "pip", "install", *args], check=True)
PY
fi
# Outside the git work tree: inside it, ansible-test would list files from the enclosing repository.
work="${TMPDIR:-/tmp}/gpufleet-ansible-test-$(echo "$top" | md5sum | cut -c1-8)/ansible_collections/gpufleet/serving"
rm -rf "$work" && mkdir -p "$work"
tar -C "$top" -cf - \
  --exclude=./.venv --exclude=./.git --exclude=./tests/output --exclude=./rendered --exclude='__pycache__' \
  --exclude=./.pytest_cache --exclude=./.ruff_cache --exclude=./.hypothesis --exclude=./benchmarks/out . \
  | tar -C "$work" -xf -
# Collections this one builds on (galaxy.yml dependencies whose module_utils and doc fragments it imports) sit beside
# it, as ansible-test expects; they come from the ansible package in the venv.
for dep in kubernetes.core amazon.aws; do
  ns=${dep%%.*} name=${dep#*.}
  src=$("$py" -c "import ansible_collections.$dep as m; print(list(m.__path__)[0])")
  mkdir -p "$work/../../$ns" && rm -rf "$work/../../$ns/$name" && cp -r "$src" "$work/../../$ns/$name"
done
cd "$work"
pyver=$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
PATH="$top/.venv/bin:$PATH" ansible-test sanity --venv --python "$pyver" --color no "$@"
