"""Errors raised when building a filter."""

from __future__ import annotations


class FilterParseError(ValueError):
    """A selector that cannot be built.  `position` is the 0-based character
    offset of the fault in `selector`; the message quotes the selector's line
    with a caret under the fault."""

    def __init__(self, selector: str, position: int, reason: str) -> None:
        self.selector = selector
        self.position = max(0, min(position, len(selector)))
        self.reason = reason
        super().__init__(self._render())

    def _render(self) -> str:
        text = self.selector
        line_start = text.rfind("\n", 0, self.position) + 1
        line_end = text.find("\n", self.position)
        if line_end < 0:
            line_end = len(text)
        line_no = text.count("\n", 0, self.position) + 1
        column = self.position - line_start
        where = f"position {self.position}" + (f" (line {line_no}, column {column + 1})" if "\n" in text else "")
        line = text[line_start:line_end].replace("\t", " ")
        return f"invalid selector at {where}: {self.reason}\n  {line}\n  {' ' * column}^"
