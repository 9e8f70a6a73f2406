"""Shared values of the memory-layer tests (a scope model, a taxonomy, scopes, a chat)."""

from __future__ import annotations

from pydantic import BaseModel

CATEGORIES = [
    {"key": "preferences", "name": "Preferences", "description": "likes, dislikes, habits, "
     "favourite food and drink, preferred tools"},
    {"key": "work", "name": "Work", "description": "projects, code, deadlines, migrations, "
     "repositories, releases, APIs"},
    {"key": "health", "name": "Health", "description": "allergies, sleep, exercise, diet, "
     "doctor"},
]  # fmt: skip


class OrgScope(BaseModel):
    org_id: str
    user_id: str


ALICE = {"org_id": "acme", "user_id": "alice"}
BOB = {"org_id": "acme", "user_id": "bob"}
EVE = {"org_id": "evil", "user_id": "eve"}

CHAT = [
    {"role": "user", "content": "I always prefer dark roast coffee in the morning. "
     "I want to finish the billing migration by Friday. We must not touch the legacy API."},
    {"role": "assistant", "content": "Noted. Anything else?"},
    {"role": "user", "content": "I am allergic to peanuts, so the team lunch must avoid them."},
]  # fmt: skip
