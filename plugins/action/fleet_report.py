# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Action plugin for gpufleet.serving.fleet_report: the report as text, as a JSON file and as fleet.html."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.pages import write_picture, write_text
from ansible_collections.gpufleet.serving.plugins.module_utils.fleet.view import (
    build_view,
    report_document,
    report_text,
)
from ansible_collections.gpufleet.serving.plugins.module_utils.guard import parse_names
from ansible_collections.gpufleet.serving.plugins.module_utils.redact import redact_text
from ansible_collections.gpufleet.serving.plugins.plugin_utils.action import GpufleetAction


class ActionModule(GpufleetAction):
    MODULE = "fleet_report"

    def execute(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        lines = [redact_text(str(line)) for line in args["lines"]]
        summary = [redact_text(str(line)) for line in args["summary"]] if args["summary"] is not None else lines[-1:]
        shown = summary if args["level"] == "summary" else lines
        report_file, html_file = args["report_file"] or None, args["html_file"] or None
        written: dict[str, Any] = {"file": None, "html": None, "html_pages": 0}
        pages: list[dict[str, Any]] = []
        if report_file or html_file:
            fleet, placement = args["fleet"], args["placement"]
            names = [str(c["name"]) for c in fleet.get("clusters") or []]
            view = build_view(
                fleet,
                placement,
                mode=args["mode"],
                capacity=args["capacity"],
                drained=parse_names(args["drained"], names, "drained"),
                cordoned=parse_names(args["cordoned"], names, "cordoned"),
                unreachable=args["unreachable"],
                outside_play=args["outside_play"],
                applied=args["applied"],
                not_reconciled={str(k): str(v) for k, v in args["not_reconciled"].items()},
                waited=args["waited"],
                summary=summary[-1] if summary else "",
            )
            if not self._task.check_mode:
                if html_file:
                    # Past 200 clusters: the main page and cluster pages beside it (module_utils/fleet/pages.py).
                    pages = write_picture(html_file, view)["pages"]
                    written["html"], written["html_pages"] = html_file, len(pages)
                if report_file:
                    doc = report_document(view, placement, lines, html_file=written["html"], html_pages=pages)
                    write_text(Path(report_file), report_text(doc))
                    written["file"] = report_file
        where = [f"{what} {path}" for what, path in (("report", written["file"]), ("picture", written["html"])) if path]
        if pages:
            where[-1] += f" (and {len(pages)} cluster pages in {Path(pages[0]['page']).parent}/ beside it)"
        if where:
            shown = [*shown, f"Written: {'; '.join(where)}"]
        return {
            "changed": False,  # the report describes the run; writing it changes nothing the fleet runs
            "msg": "\n".join(shown),
            "gpufleet_report": {"level": args["level"], **written},
            # Printed by the default callback without -v, as debug's result is.
            "_ansible_verbose_always": True,
        }
