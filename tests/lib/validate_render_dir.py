"""Validate every object in a render directory: python tests/lib/validate_render_dir.py DIR [DIR...].

Exit 0 when all objects are schema-valid for Kubernetes 1.34-1.37 (and the upstream CRD schemas when
../shared/schemas exists; otherwise custom resources are reported as not checked). Exit 1 listing the problems.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from k8s_schemas import SchemaValidationError, crd_schema_dir, validate_files


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    try:
        count = validate_files(argv, skip_missing_crds=False)
    except SchemaValidationError as exc:
        if crd_schema_dir() is None and str(exc).startswith("CRD schemas not found"):
            print(f"SKIPPED custom resources: {exc}")
            return 0
        print(exc)
        return 1
    print(f"{count} objects schema-valid (Kubernetes 1.34-1.37{' + CRD schemas' if crd_schema_dir() else ''})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
