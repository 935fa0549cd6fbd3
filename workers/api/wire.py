"""The API's boundary on the way out: domain objects as wire schemas (``mneme_client.models``).

The library's models (``memory``) and the wire schemas are separate types with the same fields
(``tests/test_wire.py`` holds them equal); a handler maps what a service returns with ``out``. (On the way
in, ``workers.api.requests`` reads wire enums and hands the handler the library's own.)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from pydantic import BaseModel

Wire = TypeVar("Wire", bound=BaseModel)


def out(schema: type[Wire], value: BaseModel) -> Wire:
    """A domain object as the wire schema of the same shape."""
    return schema.model_validate(value, from_attributes=True)


def out_all(schema: type[Wire], values: Iterable[BaseModel]) -> list[Wire]:
    return [out(schema, value) for value in values]

