"""Validate every object in a render directory: python tests/lib/validate_render_dir.py DIR [DIR...].

Exit 0 when all objects are schema-valid for Kubernetes 1.34-1.37 and, for custom resources (Flux, Argo CD,
LeaderWorkerSet, KServe, Gateway API ...), the upstream CRD schemas (``k8s_schemas.crd_schema_dir()``:
$GPUFLEET_CRD_SCHEMAS, ../shared/schemas when present, else the cache `make crds` fills), and the directory applies as
it is, one cluster directory at a time: one object per file at ``<cluster>/<namespace or _cluster>/<kind>-<name>.yaml``,
every namespace a cluster's objects use has its Namespace in that cluster's directory (Kubernetes' own namespaces and
``argocd`` / ``flux-system`` excepted). The GitOps generator under ``_fleet/<namespace>/`` is validated too; the
plan document and fleet state directly in ``_fleet/`` are not objects. A file argument is schema-checked only.
Exit 1 listing the problems, or when custom resources could not be checked because there are no CRD schemas (the
message says to run `make crds`).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from k8s_schemas import SchemaValidationError, crd_schema_dir, validate_files, validate_render_dir


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    count = 0
    try:
        for arg in argv:
            if Path(arg).is_dir():
                counts = validate_render_dir(arg)
                count += sum(counts.values())
                print(f"{arg}: " + ", ".join(f"{top} {n}" for top, n in sorted(counts.items())))
            else:
                count += validate_files([arg])
    except SchemaValidationError as exc:
        print(exc)
        return 1
    schemas = crd_schema_dir()
    print(f"{count} objects schema-valid (Kubernetes 1.34-1.37{f' + CRD schemas in {schemas}' if schemas else ''})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
