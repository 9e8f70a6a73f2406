"""Rule documents used by the rules tests (seed-003 template)."""

from __future__ import annotations

AUTH_RULE = """\
# Rule: Authentication

**Layer:** 2-Application
**AuthoritativeFor:** auth, sessions
**Topics:** security, auth, api
**Severity:** MUST

## When to Apply
- Changing login, token or session handling
- Adding an endpoint that touches user accounts

## Directives

### [MUST] Hash passwords with the platform library
Use argon2 via the framework helper.

**Rationale:** Home-made hashing is weak.

```python
hasher.hash(password)
```

### [SHOULD] Keep sessions short-lived
Expire idle sessions after 30 minutes.

### [MAY] Offer passkeys
Passkeys are phishing resistant.

## Related Rules
- api-validation
"""

VALIDATION_RULE = """\
# Rule: API Validation

**Layer:** 2-Application
**AuthoritativeFor:** validation
**Topics:** api, Authentication, validation
**Severity:** MUST

## When to Apply
- Accepting user-supplied payloads

## Directives

### [MUST] Validate every request body against a schema
Reject bodies that fail validation with 422.

### [SHOULD] Reject unknown fields
Unknown fields hide client bugs.
"""

MIGRATION_RULE = """\
# Rule: Database Migrations

**Layer:** 4-Persistence
**AuthoritativeFor:** migrations
**Topics:** persistence, database, authn
**Severity:** MUST

## When to Apply
- Changing the database schema

## Directives

### [MUST] Change the schema only through a new migration
Never edit an applied migration.

### [SHOULD] Backfill data in batches
Large updates lock tables.
"""

WILDCARD_RULE = """\
# Rule: Logging

**Layer:** *
**AuthoritativeFor:** logging
**Topics:** logging, security
**Severity:** SHOULD

## When to Apply
- Adding log statements

## Directives

### [MUST] Never log credentials or personal data
Log ids and counts instead.

### [SHOULD] Log structured events
Use key/value fields.
"""
