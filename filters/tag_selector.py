"""Tag selectors (`TagA || TagB`, `*`) -> expression tree."""

from __future__ import annotations

from .expressions import ALWAYS_TRUE, BOOL, Expression, In, Literal, Property

TAGS_PROPERTY = "TAGS"


def split_tags(selector: str | None) -> tuple[str, ...] | None:
    """The tags of a selector, trimmed, empties dropped, first occurrence
    order; None when the selector matches everything (`*`, empty, None)."""
    if selector is None:
        return None
    if not isinstance(selector, str):
        raise TypeError(f"a tag selector must be a str or None, got {type(selector).__name__}")
    if selector.strip() in ("", "*"):
        return None
    tags = dict.fromkeys(t.strip() for t in selector.split("||"))
    tags.pop("", None)
    # Only separators and blanks (`||`): RocketMQ's subscription then holds
    # no tag at all and nothing matches; an empty IN list cannot be written,
    # so the caller turns this into a match-nothing filter.
    return tuple(tags)


def parse_tag_selector(selector: str | None) -> Expression:
    """A tag selector as a condition on the TAGS property: the whole TAGS text
    must equal one of the tags (the exact re-check behind the hash pruning)."""
    tags = split_tags(selector)
    if tags is None:
        return ALWAYS_TRUE
    if not tags:
        return Literal(False, BOOL)
    return In(Property(TAGS_PROPERTY), tags)


def tag_selector_text(selector: str | None) -> str:
    """Normalised text of a tag selector, for explain output."""
    tags = split_tags(selector)
    if tags is None:
        return "*"
    return " || ".join(tags)
