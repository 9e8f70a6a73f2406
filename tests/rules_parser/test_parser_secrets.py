"""Secret detection (seed 003 Req. 13.2, 13.6): real-looking secrets yes, placeholders no."""

from __future__ import annotations

import pytest
from parser_testkit import issues_for, template

from rules_parser import find_secrets, parse, redact

# Built by concatenation so this test file itself does not look like it leaks credentials.
AWS_KEY = "AKIA" + "Q3EGRV7ZNT4W2XHM"
GITHUB_TOKEN = "ghp_" + "8fK2mQ9xLp4Rt7Vb3Nc6Zw1Yd5Hs0Je2Ua4Q"
OPENAI_KEY = "sk-proj-" + "Zx8Kq2Lm9Np4Rt7Vb3Nc6Wd1Ys5Hj0Fe"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    "eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
)
PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    + "MIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi4PnWqeX0bqqKdaGkL8fUe2s4kDq\n" * 3
    + "-----END RSA PRIVATE KEY-----"
)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (f"aws_access_key_id = {AWS_KEY}", "aws_access_key_id"),
        (f"export GITHUB_TOKEN={GITHUB_TOKEN}", "github_token"),
        (f"OPENAI_API_KEY={OPENAI_KEY}", "api_key"),
        (f"Authorization: Bearer {JWT}", "jwt"),
        (PRIVATE_KEY, "private_key"),
        ('db_password = "Xk9#mQ2!vLp7wZ"', "credential_assignment"),
        ("DATABASE_URL=postgres://app:s3cr3tP4ss@db:5432/app", "url_password"),
        ("STRIPE=" + "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "stripe_key"),
        ("SLACK=" + "xoxb-" + "1234567890-Zx8Kq2Lm9Np4", "slack_token"),
        ("GOOGLE=" + "AIza" + "SyD8Kq2Lm9Np4Rt7Vb3Nc6Wd1Ys5Hj0Fe3x", "google_api_key"),
        ("GH=" + "github_pat_" + "11ABCDEFG0Zx8Kq2Lm9Np4Rt7Vb3Nc6W", "github_token"),
    ],
)
def test_real_looking_secrets_are_found(text: str, kind: str) -> None:
    findings = find_secrets(text)
    assert [f.kind for f in findings] == [kind]


@pytest.mark.parametrize(
    "text",
    [
        'api_key = "YOUR_API_KEY"',
        'token: "<token>"',
        'password = "changeme"',
        'password = "xxxxxxxxxxxx"',
        "OPENAI_API_KEY=sk-...",
        "AKIAIOSFODNN7EXAMPLE",  # AWS's documented example key
        "postgres://user:password@localhost/db",
        "const apiKey = process.env.API_KEY",
        "-----BEGIN RSA PRIVATE KEY-----\n...\n-----END RSA PRIVATE KEY-----",
        'secret = "${VAULT_SECRET}"',
        "password: hunter2",
        "",
    ],
)
def test_placeholders_and_examples_are_not_secrets(text: str) -> None:
    assert find_secrets(text) == []


def test_findings_carry_line_and_column_but_not_the_value() -> None:
    text = f"line one\n  key {AWS_KEY}\n"
    (finding,) = find_secrets(text)
    assert (finding.line, finding.column) == (2, 7)
    assert text[finding.start : finding.end] == AWS_KEY
    assert AWS_KEY not in repr(finding)


def test_redact_replaces_every_secret_and_keeps_the_rest() -> None:
    text = f"a {AWS_KEY} b {GITHUB_TOKEN} c"
    assert redact(text) == "a [REDACTED:aws_access_key_id] b [REDACTED:github_token] c"
    assert redact("nothing to hide") == "nothing to hide"


def test_parse_reports_secrets_as_warnings_without_echoing_them() -> None:
    text = template(
        f"## Directives\n\n### [MUST] Use the key\n\n```bash\nexport GITHUB_TOKEN={GITHUB_TOKEN}\n```\n"
    )
    result = parse(text, "x.md")
    (issue,) = issues_for(result, "secret")
    assert issue.severity == "warning"
    assert text.split("\n")[issue.line - 1].startswith("export GITHUB_TOKEN=")
    assert GITHUB_TOKEN not in issue.message
    assert "github token" in issue.message
    assert result.errors == ()
