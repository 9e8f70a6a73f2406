"""Category names and the tree's structural rules, shared by every backend.

The same limits everywhere, so a tree moves between backends unchanged: a name is shown with
its whitespace folded and compared casefolded (no twins under one parent); level 1 has no
parent; level n has a parent at level n-1 in the same scope. How deep a tree may grow and
what may be filed where are the features' rules (hierarchy depth, the memory layer's
taxonomy), not these.
"""

from __future__ import annotations

from memory_core.errors import InvalidInputError
from memory_core.models import Category
from memory_core.scope import Scope

__all__ = [
    "MAX_CATEGORY_LEVEL",
    "MAX_CATEGORY_NAME_CHARS",
    "check_category_name",
    "check_level_parent",
    "normalise_category_name",
]

MAX_CATEGORY_NAME_CHARS = 200
MAX_CATEGORY_LEVEL = 100


def normalise_category_name(name: str) -> str:
    """Casefold and fold whitespace, so "Databases" and " databases " are one category."""
    return " ".join(name.split()).casefold()


def check_category_name(name: str) -> str:
    """The name as shown (whitespace folded).

    Raises:
        InvalidInputError: empty, or longer than :data:`MAX_CATEGORY_NAME_CHARS`.
    """
    shown = " ".join(name.split())
    if not shown:
        raise InvalidInputError(
            f"empty category name {name[:40]!r}", hint="name the category with a few words"
        )
    if len(shown) > MAX_CATEGORY_NAME_CHARS:
        raise InvalidInputError(
            f"category name of {len(shown)} characters is too long: {shown[:40]!r}…",
            hint=f"use at most {MAX_CATEGORY_NAME_CHARS} characters",
        )
    return shown


def check_level_parent(
    scope: Scope, level: int, parent_id: int | None, parent: Category | None
) -> None:
    """Check a new category's level against its parent (``parent`` as stored, or None).

    Raises:
        InvalidInputError: the level is out of range, level 1 with a parent, a deeper level
            without one, or a parent in another scope or not exactly one level up.
    """
    if not 1 <= level <= MAX_CATEGORY_LEVEL:
        raise InvalidInputError(
            f"category level {level} is outside 1..{MAX_CATEGORY_LEVEL}",
            hint="create categories from level 1 down",
        )
    if level == 1:
        if parent_id is not None:
            raise InvalidInputError(
                f"a level-1 category cannot have a parent (got parent_id={parent_id})",
                hint="pass parent_id=None for level 1",
            )
        return
    if parent_id is None:
        raise InvalidInputError(
            f"a level-{level} category needs a parent at level {level - 1}",
            hint="pass the parent's category_id",
        )
    if parent is None or parent.scope != scope.key:
        raise InvalidInputError(
            f"parent category {parent_id} does not exist in scope {scope.key[:80]!r}",
            hint="create the parent first, in the same scope",
        )
    if parent.level != level - 1:
        raise InvalidInputError(
            f"parent category {parent_id} is at level {parent.level}, not {level - 1}",
            hint=f"a level-{level} category needs a parent exactly one level up",
        )
