"""Which converter reads a file: by its extension, else by what its start holds.

>>> from pathlib import Path
>>> detect_format(Path("plan.jmx"), b"")
'jmeter'
>>> detect_format(Path("recording.json"), b'{"log": {"version": "1.2", "entries": []}}')
'har'
>>> detect_format(Path("load.yaml"), b"phantom:\\n  address: 127.0.0.1:80\\n")
'tank'
"""

from __future__ import annotations

import re
from pathlib import Path

from horde.errors import InvalidInput

FORMATS = ("jmeter", "tank", "har")
FORMAT_HINT = "give --format jmeter (a .jmx test plan), tank (a yandex-tank load.yaml or pandora config) or har"

_BY_SUFFIX = {".jmx": "jmeter", ".har": "har"}
#: Top-level keys of a yandex-tank config (its load generators' sections) or of pandora's own.
_TANK_KEYS = re.compile(rb"^(phantom|pandora|pools|autostop|overload|uploader)\s*:", re.MULTILINE)


def detect_format(path: Path, head: bytes) -> str:
    """``jmeter``, ``tank`` or ``har`` for the file at ``path`` whose first bytes are ``head``;
    InvalidInput (exit code 2) with a hint when it is none of them."""
    suffix = path.suffix.lower()
    if suffix in _BY_SUFFIX:
        return _BY_SUFFIX[suffix]
    text = head.lstrip()
    if text.startswith(b"<") and b"jmeterTestPlan" in head:
        return "jmeter"
    if text.startswith(b"{") and re.search(rb'"log"\s*:', head) and (b'"entries"' in head or b'"creator"' in head):
        return "har"
    if _TANK_KEYS.search(head):
        return "tank"
    raise InvalidInput(f"{path}: cannot tell what wrote this file", hint=FORMAT_HINT)
