"""What JMeter's logic controllers become in a Horde plan: Throughput, Random and Interleave
Controllers weighted choices; Loop, While, If and ForEach Controllers loops and conditions where
their expression is plain (else left out, the expression quoted); Random Order Controllers their
children in order. Transaction, Simple, Once Only, Module and Include Controllers are the
converter's own (:mod:`horde.conversion.jmeter`): they shape the walk.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from horde.conversion.findings import Outcome
from horde.conversion.jmeter_rules import Scope, Steps, Walk, engine_refuses
from horde.conversion.jmeter_text import condition, identifier, is_number
from horde.conversion.jmeter_xml import Node, pairs

#: A While Controller's passes at most (JMeter has no bound; Horde's loops have one).
WHILE_MAX = 1000
#: How much of a condition that is not converted its finding quotes.
SCRIPT_QUOTE = 300


class Place(NamedTuple):
    """A controller met in the walk: the converter, the element, its children's tree, the scope
    they get, its file's label, and the steps beside it (where a finding about it goes)."""

    conv: Walk
    element: Node
    tree: Node | None
    scope: Scope
    label: str
    siblings: Steps

    def inner_steps(self) -> Steps:
        return self.conv.inner_steps(self.element, self.tree, self.scope, self.label, self.siblings)


class JmeterControllers:
    def controller(
        self, conv: Walk, element: Node, tree: Node | None, scope: Scope, label: str, siblings: Steps
    ) -> Steps:
        kind = element.kind
        handler = getattr(self, f"_c_{kind}", None)
        if handler is None:
            why = (
                "a sampler Horde does not send (it speaks HTTP here)"
                if "Sampler" in kind
                else f"{kind}: an element Horde has no equal for"
            )
            return conv.left_out(label, element, tree, why, siblings)
        steps: Steps = handler(Place(conv, element, tree, scope, label, siblings))
        return steps

    def _branches(self, conv: Walk, tree: Node | None, scope: Scope, label: str) -> list[Steps]:
        inner = scope.inner()
        rest = []
        for child, child_tree in pairs(tree):
            if not child.enabled:
                conv.disabled(child, child_tree, label, conv.plan)
            elif not conv.configure(child, child_tree, inner, label, plan_level=False):
                rest.append((child, child_tree))
        branches = []
        for child, child_tree in rest:
            steps = conv.element(child, child_tree, inner, label, [])
            if steps:
                branches.append(steps)
        return branches

    def _c_ThroughputController(self, at: Place) -> Steps:
        steps = at.inner_steps()
        if not steps:
            return []
        conv, element, label, siblings = at.conv, at.element, at.label, at.siblings
        if element.prop("ThroughputController.style", "1") == "1":
            raw = element.prop("ThroughputController.percentThroughput", "100")
            percent = float(raw) if is_number(raw) else None
            if percent is None:
                conv.found(Outcome.NOT_CONVERTED, label, element, f"its percentage {raw} is not a number", siblings)
                return []
            if percent >= 100:
                conv.found(Outcome.CONVERTED, label, element, "100 %: its children inlined", siblings)
                return steps
            if percent <= 0:
                conv.found(Outcome.CONVERTED, label, element, "0 %: never runs, nothing in the plan", siblings)
                return []
            choice = {
                "type": "choice",
                "branches": [{"weight": percent, "steps": steps}, {"weight": round(100 - percent, 6), "steps": []}],
            }
            conv.found(
                Outcome.CONVERTED,
                label,
                element,
                f"a choice that runs its children in {percent:g} % of the passes (drawn each pass; JMeter counts "
                "them out exactly, the same share)",
                choice,
            )
            return [choice]
        limit = element.prop("ThroughputController.maxThroughput", "1")
        if not limit.isdigit():
            conv.found(Outcome.NOT_CONVERTED, label, element, f"its count {limit} is not a number", siblings)
            return []
        block = {"type": "if", "condition": f"iteration < {int(limit)}", "then": steps}
        per_thread = element.prop("ThroughputController.perThread").lower() == "true"
        note = f"runs its children in each VU's first {limit} iterations"
        if not per_thread:
            note += " (JMeter counts across all threads; the plan counts per VU)"
        conv.found(Outcome.CONVERTED if per_thread else Outcome.APPROXIMATED, label, element, note, block)
        return [block]

    def _weighted(self, at: Place, note: str, outcome: Outcome) -> Steps:
        conv, element, tree, scope, label, siblings = at.conv, at.element, at.tree, at.scope, at.label, at.siblings
        branches = self._branches(conv, tree, scope, label)
        if not branches:
            conv.found(Outcome.NOT_CONVERTED, label, element, "no request inside", siblings)
            return []
        choice = {"type": "choice", "branches": [{"weight": 1, "steps": steps} for steps in branches]}
        conv.found(outcome, label, element, f"a choice of its {len(branches)} children, equal weights: {note}", choice)
        return [choice]

    def _c_RandomController(self, at: Place) -> Steps:
        return self._weighted(at, "one drawn each pass, as JMeter does", Outcome.CONVERTED)

    def _c_InterleaveControl(self, at: Place) -> Steps:
        return self._weighted(
            at,
            "JMeter takes them in turn, the plan draws one each pass (the same mix over many passes)",
            Outcome.APPROXIMATED,
        )

    def _c_RandomOrderController(self, at: Place) -> Steps:
        conv, element, tree, scope, label, siblings = at.conv, at.element, at.tree, at.scope, at.label, at.siblings
        steps = conv.children(tree, scope.inner(), label)
        conv.found(
            Outcome.APPROXIMATED,
            label,
            element,
            "its children run in their written order (JMeter shuffles them)",
            siblings,
        )
        return steps

    def _c_LoopController(self, at: Place) -> Steps:
        raw = at.element.prop("LoopController.loops", "1")
        steps = at.inner_steps()
        if not steps:
            return []
        conv, element, label, siblings = at.conv, at.element, at.label, at.siblings
        unresolved: list[str] = []
        if (
            raw.strip() == "-1"
            or element.prop("LoopController.continue_forever").lower() == "true"
            and raw in ("", "-1")
        ):
            loop = {"type": "loop", "while": "true", "max_iterations": WHILE_MAX, "steps": steps}
            conv.found(
                Outcome.APPROXIMATED,
                label,
                element,
                f"loops forever in JMeter; the plan's loop stops after {WHILE_MAX} passes",
                loop,
            )
            return [loop]
        count = conv.names.number(raw, unresolved)
        if count is None or conv.names.resolved_number(count) < 1:
            conv.found(
                Outcome.NOT_CONVERTED,
                label,
                element,
                f"its count {raw} is not a number of passes; its children run once",
                siblings,
            )
            return steps
        loop = {"type": "loop", "count": count, "steps": steps}
        conv.found(Outcome.CONVERTED, label, element, f"a loop of {raw} passes", loop)
        return [loop]

    def _expression(self, conv: Walk, text: str, whole_var: str) -> tuple[str, set[str]] | None:
        """A condition, where a lone ``${var}`` means ``var <whole_var>``."""
        lone = re.fullmatch(r"\s*\$\{([A-Za-z_][A-Za-z0-9_]*)\}\s*", text)
        if lone is not None:
            expression = conv.names.reference(lone.group(1))
            if expression is None or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", expression):
                return None
            return f"{expression} {whole_var}", {expression.split('.')[0]}
        return condition(text, conv.names)

    def _c_WhileController(self, at: Place) -> Steps:
        return self._conditional(at, at.element.prop("WhileController.condition"), '!= "false"', "while")

    def _c_IfController(self, at: Place) -> Steps:
        return self._conditional(at, at.element.prop("IfController.condition"), '== "true"', "if")

    def _conditional(self, at: Place, text: str, lone: str, kind: str) -> Steps:
        conv, element, tree, label, siblings = at.conv, at.element, at.tree, at.label, at.siblings
        translated = self._expression(conv, text, lone) if text.strip() else None
        refused = None
        if translated is not None:
            expression, variables = translated
            probe = {"type": "if", "condition": expression} if kind == "if" else {"type": "loop", "while": expression}
            refused = engine_refuses(
                control=probe, variables=tuple(v for v in variables if v not in ("params", "vu", "iteration"))
            )
        if translated is None or refused is not None:
            shown = text.strip()[:SCRIPT_QUOTE] or "(empty: until a sampler fails)"
            why = f"its condition is not plain: {shown}" + (f" ({refused})" if refused else "")
            return conv.left_out(label, element, tree, f"{why}; the plan leaves it and its children out", siblings)
        steps = at.inner_steps()
        if not steps:
            return []
        if kind == "if":
            block: dict[str, Any] = {"type": "if", "condition": expression, "then": steps}
            note = f"if {expression}"
        else:
            block = {"type": "loop", "while": expression, "max_iterations": WHILE_MAX, "steps": steps}
            note = f"a loop while {expression}, at most {WHILE_MAX} passes (JMeter has no bound)"
        conv.found(Outcome.CONVERTED, label, element, f"{note} (JMeter: {text.strip()[:SCRIPT_QUOTE]})", block)
        return [block]

    def _c_ForeachController(self, at: Place) -> Steps:
        conv, element, tree, label, siblings = at.conv, at.element, at.tree, at.label, at.siblings
        source = element.prop("ForeachController.inputVal")
        name = element.prop("ForeachController.returnVal")
        variable = conv.names.variables.get(source)
        if source not in conv.names.variables or variable not in conv.names.lists or not name:
            why = f"it walks {source}_1, {source}_2...: the plan has no list '{source}' (an extraction with match -1 makes one)"
            return conv.left_out(label, element, tree, why, siblings)
        conv.names.variables[name] = identifier(name)
        steps = at.inner_steps()
        if not steps:
            return []
        loop = {"type": "loop", "for_each": variable, "as": identifier(name), "steps": steps}
        conv.found(Outcome.CONVERTED, label, element, f"a loop over {variable}, each item as {identifier(name)}", loop)
        return [loop]
