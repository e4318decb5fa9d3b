"""Validate every object in a render directory: python tests/lib/validate_render_dir.py DIR [DIR...].

Exit 0 when all objects are schema-valid for Kubernetes 1.34-1.37 and, for custom resources, the upstream CRD schemas
(``k8s_schemas.crd_schema_dir()``: $GPUFLEET_CRD_SCHEMAS, ../shared/schemas when present, else the cache `make crds`
fills). Exit 1 listing the problems, or when custom resources could not be checked because there are no CRD schemas
(the message says to run `make crds`).
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
        count = validate_files(argv)
    except SchemaValidationError as exc:
        print(exc)
        return 1
    schemas = crd_schema_dir()
    print(f"{count} objects schema-valid (Kubernetes 1.34-1.37{f' + CRD schemas in {schemas}' if schemas else ''})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
