"""Inventories, checklists, PR plans, command and file lists, narrative: context, not rules."""

from __future__ import annotations

import pytest

from rules_parser import parse

AGENTS = """# Agent guide

## Overview
- Users belong to many organizations
- Invoices are immutable once sent

## Tech stack
- **Auth:** NextAuth.js
- Database: PostgreSQL with Prisma
- Styling: Tailwind CSS

## Commands
- `pnpm dev` - start the dev server
- `pnpm test`: run the tests
- Run `pnpm lint` before pushing

## Project structure
- `src/app/` - App router pages
- `lib/db.ts`: database client

## PR split
- PR 4: Add notification UI components
- PR 5: Wire the notification API

## Release checklist
- [ ] Bump the version
- [x] Update the changelog

## Conventions
- Functional components with hooks
- Never use `as any`
- Use named exports
"""

DIRECTIVES = {"Run `pnpm lint` before pushing", "Functional components with hooks"}
DIRECTIVES |= {"Never use `as any`", "Use named exports"}


def test_only_rules_are_directives_and_the_rest_is_kept_as_context() -> None:
    document = parse(AGENTS, "AGENTS.md").document
    assert document is not None
    assert {d.text for d in document.directives} == DIRECTIVES
    kinds = [line.split(":", 1)[0] for line in document.context]
    assert kinds.count("narrative") == 2
    assert kinds.count("inventory") == 3
    assert kinds.count("command") == 2
    assert kinds.count("file_location") == 2
    assert kinds.count("plan_step") == 2
    assert kinds.count("checklist") == 2
    assert "inventory: **Auth:** NextAuth.js" in document.context


@pytest.mark.parametrize(
    "statement",
    [
        "Always run migrations through Alembic",
        "Never commit `.env` files",
        "Use `pnpm` rather than `npm`",
    ],
)
def test_a_statement_with_a_cue_is_a_directive_whatever_its_section(statement: str) -> None:
    document = parse(f"# G\n\n## Tech stack\n- {statement}\n", "AGENTS.md").document
    assert document is not None
    assert [d.text for d in document.directives] == [statement]


def test_correct_and_incorrect_blocks_attach_to_the_directive_they_illustrate() -> None:
    text = """---
title: Avoid Barrel File Imports
impact: CRITICAL
tags: bundle, imports
---

## Avoid Barrel File Imports

Import directly from source files instead of barrel files.

**Incorrect (imports the entire library):**

```tsx
import { Check } from 'lucide-react'
```

**Correct (imports only what you need):**

```tsx
import Check from 'lucide-react/dist/esm/icons/check'
```
"""
    document = parse(text, "rules/bundle-barrel-imports.md").document
    assert document is not None
    assert document.title == "Avoid Barrel File Imports"
    (directive,) = document.directives
    assert directive.severity == "MUST"  # impact: CRITICAL
    assert directive.polarity == "do"
    assert [e.is_anti_pattern for e in directive.examples] == [True, False]


def test_restatements_of_one_directive_are_merged() -> None:
    text = (
        "# G\n\n## Testing\n- Always run the tests before committing\n\n"
        "## Workflow\n- Run the tests before committing.\n- Keep commits small\n"
    )
    document = parse(text, "AGENTS.md").document
    assert document is not None
    assert [d.text for d in document.directives] == [
        "Always run the tests before committing",
        "Keep commits small",
    ]
