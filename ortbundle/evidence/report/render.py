"""report.html from a `Report`: a jinja2 template with HTML autoescaping on, so a file name, a
licence text or a reason from the inputs is always text, never markup."""

from __future__ import annotations

from ortbundle.evidence.report.collect import mib
from ortbundle.evidence.report.views import Report

TEMPLATE = "report.html.j2"


def render_html(report: Report) -> str:
    import jinja2  # only a build that writes a report pays for it

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("ortbundle", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=True,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["mib"] = mib
    env.filters["bytes"] = lambda n: "—" if n is None else f"{n:,}"
    env.filters["delta"] = lambda pair: (
        "" if pair[0] is None or pair[1] is None else f"{pair[1] - pair[0]:+,}"
    )
    return env.get_template(TEMPLATE).render(report=report)
