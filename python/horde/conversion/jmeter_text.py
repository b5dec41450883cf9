"""JMeter's ``${...}`` text in Horde's template syntax, and JMeter's plain conditions as Horde
expressions.

JMeter writes ``${name}`` for a variable and ``${__FUNCTION(args)}`` for a function; Horde's
templates are minijinja (``{{ name }}``). :class:`Names` knows what each JMeter variable became in
the plan (a parameter, a feeder's column, an extracted variable) and turns text over; a variable
nothing in the plan sets, or a function Horde has no equal for, is left as JMeter wrote it (sent as
text) and reported, so the plan stays valid and the finding says what to fix.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import quote

from horde.plan.redaction import is_secret_header, is_secret_parameter

#: ``${...}`` without nested braces: JMeter's own parser reads nested ones, real plans rarely do.
_REFERENCE = re.compile(r"\$\{([^{}]*)\}")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"-?\d+(\.\d+)?")
_PROPERTY = re.compile(r"\s*__(?:P|property)\(\s*([^,()]*?)\s*(?:,\s*([^()]*?)\s*)?(?:,\s*[^()]*)?\)\s*")
#: What a path keeps as it is: RFC 3986's delimiters and '%' (text JMeter already encoded).
_URL_SAFE = "/?#[]@!$&'()*+,;=:~%"
_RANDOM = re.compile(r"\s*__Random\(\s*(-?\d+)\s*,\s*(-?\d+)\s*(?:,[^()]*)?\)\s*")


def identifier(name: str) -> str:
    """A JMeter name (any text) as a Horde variable or parameter name."""
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", name.strip()) or "var"
    return cleaned if not cleaned[0].isdigit() else f"v_{cleaned}"


@dataclass
class Parameter:
    #: The default as JMeter wrote it (text); typed when the plan is written.
    default: str
    #: Used where the plan needs a number (VUs, durations): its default is written as one.
    numeric: bool = False
    #: A credential's: JMeter's value is left out of the plan.
    secret: bool = False


@dataclass
class Names:
    """What each JMeter variable is in the plan, and what text could not be turned over."""

    #: JMeter variable → Horde expression (``params.host``, ``users.login``, ``token``).
    variables: dict[str, str] = field(default_factory=dict)
    parameters: dict[str, Parameter] = field(default_factory=dict)
    #: Variables extracted with ``pick: all`` (lists, which a ForEach Controller walks).
    lists: set[str] = field(default_factory=set)

    def parameter(self, name: str, default: str) -> str:
        """Declares (once) a parameter for JMeter's property ``name``; its Horde name. A name the
        plan layer calls a credential's (``password``, ``api_key``...) gets an empty default: the
        value is given with ``-p``, never written to the plan."""
        horde_name = identifier(name)
        for known in self.parameters:
            if known.lower() == horde_name.lower():
                return known
        secret = is_secret_header(name) or is_secret_parameter(name)
        self.parameters[horde_name] = Parameter("" if secret else default, secret=secret and bool(default))
        return horde_name

    def typed_parameters(self) -> dict[str, bool | int | float | str]:
        typed: dict[str, bool | int | float | str] = {}
        for name, parameter in self.parameters.items():
            typed[name] = (
                number(parameter.default) if parameter.numeric and is_number(parameter.default) else parameter.default
            )
        return typed

    def reference(self, inner: str) -> str | None:
        """The Horde expression for one ``${inner}``, or None when there is none."""
        stripped = inner.strip()
        if _IDENTIFIER.fullmatch(stripped) and not stripped.startswith("__"):
            return self.variables.get(stripped)
        prop = _PROPERTY.fullmatch(inner)
        if prop is not None and prop.group(1):
            return f"params.{self.parameter(prop.group(1), prop.group(2) or '')}"
        random = _RANDOM.fullmatch(inner)
        if random is not None:
            return f"random_int({random.group(1)}, {random.group(2)})"
        if re.fullmatch(r"\s*__UUID(\(\s*\))?\s*", inner):
            return "uuid()"
        if re.fullmatch(r"\s*__time(\(\s*,?\s*\))?\s*", inner):
            return "now_ms()"
        if re.fullmatch(r"\s*__threadNum(\(\s*\))?\s*", inner):
            return "vu"
        return None

    def url_template(self, text: str, unresolved: list[str], *, every: bool = False) -> str:
        """:meth:`template` for a path or a query value: the text outside references
        percent-encoded (spaces, control characters, non-ASCII; with ``every`` the URL's own
        delimiters too, as JMeter's "URL Encode?" does), so that the request line is valid."""
        safe = "" if every else _URL_SAFE
        return self.template(text, unresolved, literal=lambda part: quote(part, safe=safe))

    def template(self, text: str, unresolved: list[str], literal: Callable[[str], str] | None = None) -> str:
        """``text`` with every ``${...}`` Horde can express as a template expression; the others are
        left as written and appended to ``unresolved``. Text that minijinja would read as a tag
        (``{{``, ``{%``, ``{#``) is escaped so that it is sent as written."""
        written = literal or _literal
        out: list[str] = []
        last = 0
        for match in _REFERENCE.finditer(text):
            out.append(written(text[last : match.start()]))
            expression = self.reference(match.group(1))
            if expression is None:
                unresolved.append(match.group(0))
                # Sent as JMeter wrote it (what JMeter sends for a variable nothing set), unless it
                # holds a space a request line cannot carry.
                out.append(
                    _literal(match.group(0)) if not re.search(r"\s", match.group(0)) else written(match.group(0))
                )
            else:
                out.append("{{ " + expression + " }}")
            last = match.end()
        out.append(written(text[last:]))
        return "".join(out)

    def number(self, text: str, unresolved: list[str]) -> int | float | str | None:
        """A number field: the number, ``{{ params.NAME }}`` for a property or a variable that is a
        parameter (then the parameter is numeric), or None when it is neither."""
        stripped = text.strip()
        if is_number(stripped):
            return number(stripped)
        match = _REFERENCE.fullmatch(stripped)
        if match is not None:
            expression = self.reference(match.group(1))
            if expression is not None and expression.startswith("params."):
                name = expression.removeprefix("params.")
                if is_number(self.parameters[name].default):
                    self.parameters[name].numeric = True
                    return "{{ params." + name + " }}"
        unresolved.append(stripped or "(empty)")
        return None

    def resolved_number(self, value: float | str) -> float:
        """A number field's value with parameters at their defaults (for arithmetic on stages)."""
        if isinstance(value, str):
            return float(number(self.parameters[value.strip("{} ").removeprefix("params.")].default))
        return float(value)


def is_number(text: str) -> bool:
    return _NUMBER.fullmatch(text.strip()) is not None


def number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() and "." not in text else value


def _literal(text: str) -> str:
    """Text minijinja sends as it is: its tag openers written as template strings, and a '{' at
    the end too (a template may follow it, and '{' + '{{' would open a tag a character early)."""
    if not any(opener in text for opener in ("{{", "{%", "{#")) and not text.endswith("{"):
        return text
    text = re.sub(r"\{([{%#])", lambda m: "{{ '{" + m.group(1) + "' }}", text)
    return text[:-1] + "{{ '{' }}" if text.endswith("{") else text


# --- conditions -----------------------------------------------------------------------------------

_FUNCTION = re.compile(r"\s*\$\{__(?:jexl3|jexl2|groovy|javaScript)\((.*)\)\}\s*", re.DOTALL)
_TOKEN = re.compile(
    r"""\s*(?:
      (?P<quoted_var>(?P<q>["'])\$\{(?P<qv>[^{}]*)\}(?P=q))
    | (?P<var>\$\{(?P<v>[^{}]*)\})
    | (?P<vars_get>vars\.get\(\s*["'](?P<g>[A-Za-z_][A-Za-z0-9_]*)["']\s*\))
    | (?P<string>"[^"$\\]*"|'[^'$\\]*')
    | (?P<number>-?\d+(?:\.\d+)?)
    | (?P<op>==|!=|<=|>=|<|>|&&|\|\||!|\(|\))
    | (?P<word>true|false)
    )""",
    re.VERBOSE,
)
_OPERATORS = {"&&": "and", "||": "or", "!": "not", "(": "(", ")": ")"}


def condition(text: str, names: Names) -> tuple[str, set[str]] | None:
    """A JMeter condition (an If or While Controller's, a ``${__jexl3(...)}`` or a plain
    comparison of variables with literals) as a Horde expression with the variables it reads;
    None when it is not plain (scripts, method calls, a variable the plan does not set)."""
    inner = text
    function = _FUNCTION.fullmatch(text)
    if function is not None:
        inner = function.group(1)
        # ${__jexl3(expr,resultVar)}: the second argument only names where JMeter stores the result
        inner = re.sub(r",\s*[A-Za-z_][A-Za-z0-9_]*\s*$", "", inner)
    position = 0
    parts: list[str] = []
    read: set[str] = set()
    kinds: list[str] = []
    while position < len(inner):
        if not inner[position:].strip():
            break
        match = _TOKEN.match(inner, position)
        if match is None:
            return None
        position = match.end()
        name = match.group("qv") or match.group("v") or match.group("g")
        if name is not None:
            expression = names.reference(name)
            if expression is None or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", expression):
                return None
            read.add(expression.split(".")[0])
            parts.append(expression)
            kinds.append("var")
        elif match.group("op"):
            op = match.group("op")
            parts.append(_OPERATORS.get(op, op))
            kinds.append("op")
        elif match.group("word"):
            parts.append(match.group("word"))
            kinds.append("literal")
        elif match.group("number"):
            parts.append(match.group("number"))
            kinds.append("number")
        else:
            parts.append('"' + match.group("string")[1:-1] + '"')
            kinds.append("literal")
    if not parts:
        return None
    # JMeter's variables are text: compared with a number, the variable is read as one.
    for index, kind in enumerate(kinds):
        if kind != "var":
            continue
        neighbours = [kinds[i] for i in (index - 2, index + 2) if 0 <= i < len(kinds)]
        ops = [parts[i] for i in (index - 1, index + 1) if 0 <= i < len(parts)]
        if "number" in neighbours and any(op in ("<", ">", "<=", ">=", "==", "!=") for op in ops):
            parts[index] = f"({parts[index]} | float)"
    return " ".join(parts), read
