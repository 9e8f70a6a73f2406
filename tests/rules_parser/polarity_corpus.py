"""Prohibitions written every way real rule files write them, in every supported format.

Each statement listed in ``PROHIBITED`` / ``ASK_FIRST`` appears in the bodies below; the tests
check that none of them is ever rendered as a positive instruction.
"""

from __future__ import annotations

PROHIBITED = (
    "Use `as any` type casting",
    "Commit secrets or `.env` files",
    "Never edit generated files",
    "Do not log access tokens",
    "Don't use default exports",
    "Avoid mutable global state",
    "No `console.log` in production code",
    "❌ Raw SQL string concatenation",
    "Push directly to main",
    "Disable the linter for a whole file",
    "Catch bare exceptions",
    "Mock the database in integration tests",
)
ASK_FIRST = ("Adding a new dependency", "Changing the database schema")
POSITIVE = ("Run the tests before committing", "Use strict TypeScript")

_BOUNDARIES = """## Boundaries

### ✅ Always do
- Run the tests before committing
- Use strict TypeScript

### ⚠️ Ask first
- Adding a new dependency
- Changing the database schema

### 🚫 Never do
- Use `as any` type casting
- Commit secrets or `.env` files
- Never edit generated files

## Style
- Do not log access tokens
- Don't use default exports
- Avoid mutable global state
- No `console.log` in production code
- ❌ Raw SQL string concatenation

Never do the following:
- Push directly to main
- Disable the linter for a whole file

## Anti-patterns
- Catch bare exceptions

## Prohibited
- Mock the database in integration tests
"""

FOREIGN_FILES = {
    "AGENTS.md": "# Agent guide\n\n" + _BOUNDARIES,
    "CLAUDE.md": "# CLAUDE.md\n\nThis file guides Claude Code.\n\n" + _BOUNDARIES,
    ".cursor/rules/typescript.mdc": (
        "---\ndescription: TypeScript rules\nglobs: src/**/*.ts\nalwaysApply: false\n---\n\n"
        + _BOUNDARIES
    ),
    ".github/copilot-instructions.md": "# Copilot instructions\n\n" + _BOUNDARIES,
    ".github/instructions/ts.instructions.md": "---\napplyTo: '**/*.ts'\n---\n\n" + _BOUNDARIES,
    ".clinerules/style.md": _BOUNDARIES,
    ".roo/rules/style.md": _BOUNDARIES,
    ".windsurf/rules/style.md": _BOUNDARIES,
    "GEMINI.md": "# Gemini\n\n" + _BOUNDARIES,
    "docs/guidelines.md": _BOUNDARIES,
}
# A plain bullet list with no headings: only the wording carries the polarity.
PLAIN_LIST = """- Always run the tests before committing
- Never edit generated files
- Do not log access tokens
- Don't use default exports
- Avoid mutable global state
- No `console.log` in production code
- ❌ Raw SQL string concatenation
- Ask first before adding a new dependency
"""
PLAIN_PROHIBITED = PROHIBITED[2:8]

TEMPLATE_FILE = """# Rule: Boundaries

**Layer:** *
**AuthoritativeFor:** boundaries
**Topics:** security, git
**Severity:** SHOULD

## Directives

### [MUST] Never edit generated files

### [MUST] Do not log access tokens

### Don't use default exports

### [SHOULD] Avoid mutable global state

### [MUST] Run the tests before committing

### [MUST] Ask first before adding a new dependency
"""
TEMPLATE_PROHIBITED = (
    "Never edit generated files",
    "Do not log access tokens",
    "Don't use default exports",
    "Avoid mutable global state",
)
