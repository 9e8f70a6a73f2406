"""Rules written outside bullets still become directives: table rows, sentences inside prose,
rule labels over a list, rule headings, a paragraph that ends in a colon, a shouted NOT."""

from __future__ import annotations

from rules_parser import Directive, parse
from rules_parser.foreign import reads_as_rule, split_sentences, split_table_row


def directives(text: str, path: str = "AGENTS.md") -> list[Directive]:
    document = parse(text, path).document
    assert document is not None
    return list(document.directives)


def by_text(found: list[Directive], start: str) -> Directive:
    hits = [d for d in found if d.text.startswith(start)]
    assert len(hits) == 1, [d.text for d in found]
    return hits[0]


TABLE = """# Data access

Each row is a hazard and the safe pattern.

| Rule | Do instead | Ref |
| --- | --- | --- |
| Do not build SQL by joining strings with user input. | Use bound parameters. | A1 |
| Never cache session tokens in `localStorage`. | Keep them in an http-only cookie. | A2 |
| Do not shell out with `sh -c "a | b"` on user input. | Pass an argv list. | A3 |
"""


def test_table_rows_with_a_rule_column_are_directives_with_the_other_cells_as_detail() -> None:
    found = directives(TABLE)
    assert len(found) == 3
    sql = by_text(found, "Do not build SQL")
    assert (sql.line_start, sql.line_end) == (7, 7)
    assert sql.polarity == "dont"
    assert sql.detail is not None and "Do instead: Use bound parameters." in sql.detail
    shell = by_text(found, "Do not shell out")
    assert shell.line_start == 9
    assert '`sh -c "a | b"`' in shell.text  # a pipe inside code does not split the cell


def test_a_reference_table_stays_context() -> None:
    text = """# Ports

| Service | Port |
| --- | --- |
| api | 8080 |
| web | 3000 |
"""
    assert directives(text) == []


def test_a_dont_column_gives_its_rows_prohibition_polarity() -> None:
    text = """# Style

| Don't | Do |
| --- | --- |
| Use `var` declarations | Use `const` or `let` |
| Use default exports | Use named exports |
"""
    found = directives(text)
    assert [d.polarity for d in found] == ["dont", "dont"]
    assert found[0].text == "Use `var` declarations"


PROSE = """# Builds

## Verifying changes

**Never run the full production build to check a change.** It takes minutes and proves
little. Nobody reads its output. For a quick check, run the type checker instead.
We keep the caches in the repository root. They are small.

Please include tests with every change. Strive to test behaviour, not implementation.
"""


def test_rule_sentences_inside_a_prose_paragraph_become_directives_on_their_own_lines() -> None:
    found = directives(PROSE)
    never = by_text(found, "**Never run the full production build")
    assert never.line_start == 5
    # The sentences after it that are not rules are its detail.
    assert never.detail is not None and "proves little" in never.detail
    assert never.polarity == "dont"
    run = by_text(found, "For a quick check, run")
    assert (run.line_start, run.line_end) == (6, 7)  # "We keep …" is its detail
    assert not any(d.text.startswith("We keep") for d in found)
    # "Please include …" and "Strive to …" read as instructions.
    assert by_text(found, "Please include tests").line_start == 9
    assert by_text(found, "Strive to test behaviour").line_start == 9


def test_split_sentences_keeps_code_and_abbreviations_whole() -> None:
    text = "Call `a.b()`. Then e.g. Foo runs.\nUse X. Done"
    assert split_sentences(text, 10) == [
        ("Call `a.b()`.", 10, 10),
        ("Then e.g. Foo runs.", 10, 10),
        ("Use X.", 11, 11),
        ("Done", 11, 11),
    ]


def test_a_paragraph_ending_in_a_colon_that_states_a_rule_is_a_directive() -> None:
    text = """# Network

When calling the HTTP client, you must pass the shared proxy settings:

```ts
client.get(url, proxySettings())
```

For cached lookups (no network, no UI), use the memo helpers:

Examples of a data hook:
"""
    found = directives(text)
    proxy = by_text(found, "When calling the HTTP client")
    assert proxy.examples and "proxySettings" in proxy.examples[0].code
    by_text(found, "For cached lookups (no network, no UI), use")
    assert not any(d.text.startswith("Examples of") for d in found)


def test_a_polarity_label_paragraph_still_labels_the_list_after_it() -> None:
    text = """# Style

Never do the following:

- Use `any` in public types
"""
    found = directives(text)
    assert [(d.text, d.polarity) for d in found] == [("Use `any` in public types", "dont")]


def test_a_list_label_that_is_itself_a_rule_is_a_directive_and_its_items_stay() -> None:
    text = """# Tests

- Avoid fixed sleeps in tests that wait for a worker. Instead:
  - wait on an event the worker sets
  - poll with a deadline
- Languages:
  - Python
"""
    found = directives(text)
    label = by_text(found, "Avoid fixed sleeps")
    assert (label.line_start, label.line_end) == (3, 3)
    assert label.detail is not None and "poll with a deadline" in label.detail
    assert {d.text for d in found} >= {"wait on an event the worker sets", "poll with a deadline"}
    assert not any(d.text.startswith("Languages") for d in found)


def test_a_heading_that_states_a_rule_is_a_directive_but_a_label_heading_is_not() -> None:
    text = """# Migrations

### Rule 1: migrations must be idempotent

Re-running a migration on a migrated database is a no-op.

### Never do

- Edit a migration that has shipped

### Layout of the folder

Files are numbered.
"""
    found = directives(text)
    rule = by_text(found, "migrations must be idempotent")
    assert (rule.line_start, rule.line_end) == (3, 3)
    assert rule.detail is not None and "no-op" in rule.detail
    edit = by_text(found, "Edit a migration")
    assert edit.polarity == "dont"
    assert not any("Never do" in d.text or "Layout" in d.text for d in found)


def test_a_shouted_not_in_a_command_list_makes_a_directive() -> None:
    text = """# Commands

- **Build**: `pnpm compile` — NOT `pnpm build`.
- `pnpm dev` - start the dev server
"""
    document = parse(text, "AGENTS.md").document
    assert document is not None
    assert [d.text for d in document.directives] == [
        "**Build**: `pnpm compile` — NOT `pnpm build`."
    ]
    assert document.context == ("command: `pnpm dev` - start the dev server",)


def test_reads_as_rule() -> None:
    assert reads_as_rule("When the schema changes, regenerate the client")
    assert reads_as_rule("Please open an issue first")
    assert reads_as_rule("Secrets must stay out of the repository")
    assert not reads_as_rule("The service listens on port 8080.")
    assert not reads_as_rule("Users may have many projects")


def test_split_table_row_honours_escapes_and_code() -> None:
    assert split_table_row(r"| a \| b | `c | d` | e |") == [r"a \| b", "`c | d`", "e"]
