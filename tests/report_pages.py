"""Reading a written report as a test checks it: a page carries its chart code and its figures
gzip-compressed in base64 (``horde.report.page.packed``), so a search of the page's text alone
would miss whatever the figures hold (a step's name, a monitor's series, a secret that should
not be there)."""

from __future__ import annotations

import base64
import gzip
import re

_PACKED = re.compile(r'<script id="([\w-]+)" type="application/gzip;base64">([A-Za-z0-9+/=]*)</script>')


def unpacked(html: str, element_id: str) -> bytes:
    """A packed part of a report (its element's base64 of gzip), unpacked by the standard library."""
    for found, data in _PACKED.findall(html):
        if found == element_id:
            return gzip.decompress(base64.b64decode(data))
    raise AssertionError(f"no {element_id} in the page")


def readable(html: str) -> str:
    """The page's text with each packed part but the chart library unpacked after it: what a
    search for a name or a value must look through."""
    parts = [
        gzip.decompress(base64.b64decode(data)).decode("utf-8")
        for element_id, data in _PACKED.findall(html)
        if element_id != "plotly-js"
    ]
    return "\n".join([html, *parts])
