"""Collects validation issues for one document, and suggests fixes for misspelt values."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rapidfuzz import fuzz, process, utils

from rules_parser.models import IssueSeverity, ValidationIssue

__all__ = ["IssueSink", "did_you_mean"]


@dataclass
class IssueSink:
    """Issues of one document, kept in the order found; ``sorted`` orders them by line."""

    path: str
    issues: list[ValidationIssue] = field(default_factory=list)

    def add(
        self,
        severity: IssueSeverity,
        line: int,
        message: str,
        *,
        field: str | None = None,
        column: int | None = None,
    ) -> None:
        self.issues.append(
            ValidationIssue(
                path=self.path,
                line=max(1, line),
                column=column,
                field=field,
                message=message,
                severity=severity,
            )
        )

    def error(self, line: int, message: str, **kw: str | int | None) -> None:
        self.add("error", line, message, **kw)  # type: ignore[arg-type]

    def warning(self, line: int, message: str, **kw: str | int | None) -> None:
        self.add("warning", line, message, **kw)  # type: ignore[arg-type]

    def sorted(self) -> tuple[ValidationIssue, ...]:
        return tuple(sorted(self.issues, key=lambda i: (i.line, i.severity != "error")))


def did_you_mean(value: str, choices: Sequence[str]) -> str | None:
    """The closest allowed value to a misspelt one, or None when nothing is close."""
    match = process.extractOne(
        value, choices, scorer=fuzz.WRatio, processor=utils.default_process, score_cutoff=60
    )
    return match[0] if match else None
