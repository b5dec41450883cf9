"""The ``postgres`` transport's steps: SQL sent straight to a PostgreSQL database.

A plan whose ``target.base_url`` is ``postgresql://user@host:port/database`` runs ``sql`` steps.
The password is never in the plan: ``target.password_env`` names the environment variable the
engine reads it from (or ``target.password_file`` a file).

>>> step = SqlStep.model_validate({"type": "sql", "name": "player", "mode": "prepared",
...     "query": "SELECT name FROM player WHERE id = $1", "params": ["{{ random_int(1, 100) }}"],
...     "extract": [{"var": "name", "from": "column", "column": "name"}],
...     "checks": [{"type": "row_count", "equals": 1}]})
>>> step.mode, step.checks[0].equals, step.extract[0].column
('prepared', 1, 'name')
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Field, field_validator

from horde.plan.common import (
    STRICT_KEYS,
    TAGGED,
    THINK_TIME_DESCRIPTION,
    ThinkTime,
    check_json_value,
)

__all__ = ["SqlColumnCheck", "SqlExtractor", "SqlRowCountCheck", "SqlStatement", "SqlStep", "is_postgres_url"]

#: The schemes of a PostgreSQL target (libpq's connection URIs).
POSTGRES_SCHEMES = ("postgresql", "postgres")


def is_postgres_url(url: str) -> bool:
    """Whether a base URL names a PostgreSQL database.

    >>> is_postgres_url("postgresql://app@127.0.0.1:5432/game"), is_postgres_url("http://h")
    (True, False)
    """
    return url.startswith(tuple(f"{scheme}://" for scheme in POSTGRES_SCHEMES))


class SqlStatement(BaseModel):
    """One statement of a step that runs several in one transaction."""

    model_config = STRICT_KEYS

    query: str = Field(min_length=1, description="the SQL; $1, $2... are its params")
    params: list[str] = Field(default_factory=list, description="templates rendered into $1, $2...")


class SqlExtractor(BaseModel):
    """Takes a value of a SQL result into a VU variable."""

    model_config = STRICT_KEYS

    var: str = Field(description="the variable to set")
    from_: Literal["column", "row_count"] = Field(
        alias="from",
        description="'column' (a column of the first row) or 'row_count' (rows returned or affected)",
    )
    column: str | None = Field(default=None, description="from: column: the column's name")
    default: Any = Field(default=None, description="the value when there is no row or the column is NULL")

    @field_validator("default")
    @classmethod
    def _check_default(cls, value: Any) -> Any:
        return check_json_value(value)


class SqlRowCountCheck(BaseModel):
    """Rows returned (a query) or affected (insert, update, delete) within bounds."""

    model_config = TAGGED

    type: Literal["row_count"] = Field(description="this check: 'row_count'")
    equals: int | None = Field(default=None, ge=0, description="the exact count, or null")
    min: int | None = Field(default=None, ge=0, description="the least count, or null")
    max: int | None = Field(default=None, ge=0, description="the most count, or null")


class SqlColumnCheck(BaseModel):
    """A column of the first row equals a value."""

    model_config = TAGGED

    type: Literal["column"] = Field(description="this check: 'column'")
    column: str = Field(min_length=1, description="the column of the first row, by name")
    equals: Any = Field(description="the expected value (a number, string, boolean or null)")


SqlCheck = Annotated[Union[SqlRowCountCheck, SqlColumnCheck], Field(discriminator="type")]


class SqlStep(BaseModel):
    """One SQL statement, or several in one transaction, timed and recorded under ``name``."""

    model_config = STRICT_KEYS

    type: Literal["sql"] = Field(default="sql", description="this step: 'sql' (a postgresql:// target)")
    name: str = Field(min_length=1, description="the step's name, unique in its scenario")
    query: str | None = Field(default=None, description="the SQL, e.g. 'SELECT * FROM player WHERE id = $1'")
    params: list[str] = Field(default_factory=list, description="templates rendered into $1, $2...")
    statements: list[SqlStatement] = Field(
        default_factory=list,
        description="instead of query: several statements run in one transaction (BEGIN ... COMMIT, "
        "rolled back on an error); extractors and checks read the last one's result",
    )
    mode: Literal["simple", "extended", "prepared"] = Field(
        default="extended",
        description="how statements go over the wire, as pgbench -M: 'simple' (params quoted into "
        "the text), 'extended' (the default: parse, bind, execute in one round trip) or 'prepared' "
        "(prepared once per connection)",
    )
    think_time: ThinkTime | None = Field(
        default=None, description=f"the pause after this step: {THINK_TIME_DESCRIPTION}"
    )
    extract: list[SqlExtractor] = Field(
        default_factory=list,
        description="values to take from the result: [{var, from: column|row_count, column, default}]",
    )
    checks: list[SqlCheck] = Field(
        default_factory=list,
        description="conditions the result must meet, else check_failed: {type: row_count, equals|min|max}, "
        "{type: column, column, equals}",
    )
    on_check_failure: Literal["continue", "end_iteration"] = Field(
        default="continue",
        description="what a failed check does next: 'continue' (default) or 'end_iteration'",
    )
