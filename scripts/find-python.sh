#!/usr/bin/env bash
# Print the newest Python >= 3.11 found on PATH, then among pyenv versions.
set -u
best=""; bestv=0
consider() {
  local py=$1 v
  v=$("$py" -c 'import sys; print(sys.version_info[0]*100+sys.version_info[1]) if sys.version_info >= (3, 11) else print(0)' 2>/dev/null) || return 0
  if [ "${v:-0}" -gt "$bestv" ]; then bestv=$v; best=$py; fi
}
for name in python3.14 python3.13 python3.12 python3.11 python3; do
  p=$(command -v "$name" 2>/dev/null) && consider "$p"
done
for p in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/*/bin/python3; do
  [ -x "$p" ] && consider "$p"
done
echo "$best"
