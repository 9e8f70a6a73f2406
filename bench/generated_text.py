"""Deterministic generated text on four topics (databases, cooking, astronomy, security), for
the streamed-ingest benchmark and tests: paragraphs of topic words, three per topic in turn."""

from __future__ import annotations

import random
import sys

_TOPICS = {
    "db": [
        "index",
        "query",
        "postgres",
        "table",
        "transaction",
        "vacuum",
        "btree",
        "planner",
        "replica",
        "schema",
    ],
    "cook": [
        "oven",
        "flour",
        "butter",
        "simmer",
        "garlic",
        "onion",
        "roast",
        "sauce",
        "knead",
        "dough",
    ],
    "astro": [
        "galaxy",
        "orbit",
        "telescope",
        "nebula",
        "comet",
        "planet",
        "redshift",
        "star",
        "quasar",
        "eclipse",
    ],
    "sec": [
        "token",
        "password",
        "cipher",
        "firewall",
        "breach",
        "audit",
        "exploit",
        "patch",
        "vulnerability",
        "tls",
    ],
}


def generate(n_bytes: int, seed: int = 7) -> str:
    """About ``n_bytes`` of ASCII text in paragraphs (the same text for the same arguments)."""
    rnd = random.Random(seed)
    names = list(_TOPICS)
    out: list[str] = []
    size = 0
    index = 0
    while size < n_bytes:
        words = _TOPICS[names[(index // 3) % len(names)]]
        para = " ".join(
            " ".join(rnd.choice(words) for _ in range(rnd.randint(8, 16))).capitalize()
            + f" number {index}."
            for _ in range(rnd.randint(4, 9))
        )
        out.append(para)
        size += len(para) + 2
        index += 1
    return "\n\n".join(out)


if __name__ == "__main__":
    with open(sys.argv[2], "w", encoding="utf-8") as out:
        out.write(generate(int(sys.argv[1])))
