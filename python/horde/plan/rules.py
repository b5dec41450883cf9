"""What a step does with what it got back: extractors (values into VU variables) and checks.

HTTP steps and message ``receive`` steps share them (``horde.plan.steps`` re-exports them).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Field, field_validator

from horde.plan.common import (
    STRICT_KEYS,
    TAGGED,
    check_json_value,
)
from horde.plan.build_rules import check_variable_name

__all__ = ["BodyContainsCheck", "BodyMatchesCheck", "Check", "Extractor", "JsonCheck", "StatusCheck"]


class Extractor(BaseModel):
    """Takes a value from a response into a VU variable."""

    model_config = STRICT_KEYS

    var: str = Field(description="the variable to set, e.g. 'building_id'; templates use it as {{ building_id }}")
    from_: Literal["json", "regex", "header", "status"] = Field(
        alias="from",
        description="where the value comes from: 'json' (a JSONPath over the body), 'regex' (over "
        "the body), 'header' (a response header) or 'status' (the status code)",
    )
    expression: str | None = Field(
        default=None,
        description="json: an RFC 9535 JSONPath such as '$.buildings[?@.can_build == true].id'; "
        "regex: a pattern, its first group is taken (or the whole match); header: the header's "
        "name; status: none",
    )
    pick: Literal["first", "random", "all"] = Field(
        default="first",
        description="which match to keep: 'first' (default), 'random' (one at random) or 'all' (a list)",
    )
    default: Any = Field(
        default=None,
        description="the value when nothing matches; without one (null), the variable is unset "
        "and the step counts an extract_failed error",
    )

    @field_validator("var")
    @classmethod
    def _check_var(cls, var: str) -> str:
        return check_variable_name(var, "variable")

    @field_validator("default")
    @classmethod
    def _check_default(cls, value: Any) -> Any:
        return check_json_value(value)


class StatusCheck(BaseModel):
    """The response's status is one of a list."""

    model_config = TAGGED

    type: Literal["status"] = Field(default="status", description="this check: 'status'")
    in_: list[Annotated[int, Field(ge=100, le=599)]] = Field(
        alias="in",
        min_length=1,
        description="the accepted status codes, e.g. [200, 201]; a status check replaces the "
        "default rule that a status >= 400 is an error",
    )


class JsonCheck(BaseModel):
    """A JSONPath over the response body matches something (or equals a value)."""

    model_config = TAGGED

    type: Literal["json"] = Field(default="json", description="this check: 'json'")
    expression: str = Field(min_length=1, description="an RFC 9535 JSONPath, e.g. '$.status' or '$.items[?@.ok]'")
    equals: Any = Field(
        default=None,
        description="the value the first match must equal; without it (null) the path must match something",
    )

    @field_validator("equals")
    @classmethod
    def _check_equals(cls, value: Any) -> Any:
        return check_json_value(value)


class BodyContainsCheck(BaseModel):
    """The response body contains a text."""

    model_config = TAGGED

    type: Literal["body_contains"] = Field(default="body_contains", description="this check: 'body_contains'")
    text: str = Field(min_length=1, description="the text the body must contain")


class BodyMatchesCheck(BaseModel):
    """The response body matches a regular expression."""

    model_config = TAGGED

    type: Literal["body_matches"] = Field(default="body_matches", description="this check: 'body_matches'")
    pattern: str = Field(min_length=1, description="a regular expression the body must match somewhere")


Check = Annotated[
    Union[StatusCheck, JsonCheck, BodyContainsCheck, BodyMatchesCheck],
    Field(discriminator="type"),
]
