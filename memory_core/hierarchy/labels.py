"""Names for clustered categories, from the chunks' own words (class-based TF-IDF). Pure.

A node's name is its most *distinctive* term against its siblings (the other children of its
parent; the other nodes of its level when it is an only child): the share of the node's chunks
that use the term, times ``log(1 + A / f)`` where ``f`` counts the chunks of every sibling that
use it and ``A`` is the siblings' average size (BERTopic's c-TF-IDF, with chunk counts).

What makes a name a person would choose, not a word fragment:

- terms are whole words as written in the text, or two-word phrases that occur as such in at
  least two chunks ("neural network"), never words glued from different sentences;
- stopwords and generic words ("decided", "lower", "example", "use") are never names; words that
  read as adverbs (-ly) or past tenses (-ed) are discounted; words the text uses after a
  determiner ("the qubit", "a grinder") count as nouns and are preferred;
- one term per name (a second glued on reads as two fragments: "Email Decided");
- a parent's term should be used across its children (its score is weighed by the share of
  children using it), so a group of related topics gets the word they share;
- a child never repeats its ancestors' words, and siblings never share a name.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_core.hierarchy.clustering import TreeNode, TreeShape
from memory_core.llm.keyphrases import STOPWORDS, stem

__all__ = ["GENERIC_WORDS", "Vocabulary", "name_path", "name_tree"]

_MARKUP = re.compile(r"\\[A-Za-z]+|https?://\S+")  # LaTeX commands, links
_WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*", re.UNICODE)
_BREAK = re.compile(r"[.,;:!?()\[\]{}\"“”/|=<>*#`\n]+")
_DETERMINER_TEXT = (
    "the a an this that these those my your our their its his her each every any some no of per"
)
_DETERMINERS = frozenset(_DETERMINER_TEXT.split())
_GENERIC_TEXT = """
    able absolutely accept according actual actually add added adding almost alone along
    already always amount answer answered answering answers anybody anyone anything anyway
    anywhere appear approach area areas aside ask asked asking away back bad basic basically
    become becomes begin beginning behind believe best better big bit bits called came can
    case cases certain certainly change changed changes check clear clearly come comes coming
    common completely consider considered correct could course currently day days decide
    decided definitely depend depends describe described detail details different difficult
    directly doing done due easier easily easy effect either else end enough entire entirely
    especially etc exactly example examples exist exists expect experience explain fact fairly
    far feel felt find finding fine follow following found four free full fully general
    generally getting give given gives giving goes going gone gonna good got great greater
    group guess happen happens hard help helps high higher highly hope hour hours idea ideas
    important include includes including indeed info information instead interest
    interested interesting issue issues keep kind kinds know known knows large larger
    largely later least left less let level levels lot lots low lower mainly major make
    makes making matter mean meaning means mentioned might mind minor mostly move much name
    named nearly necessary need needed needs next nice nothing number numbers obviously
    often okay order others otherwise part particular particularly parts people perhaps
    person place plus point points possible possibly post posted pretty probably problem
    problems provide provided put question questions quite rather read real really reason
    reasons related relatively result results right run running said saying says second see
    seeing seem seemed seems seen sense set several short show shown shows side significant
    similar simple simply since small smaller something sometimes somewhat soon sort
    specific start started state states step steps stuff sure take taken takes taking talk
    tell term terms thank thanks therefore thing things think thinking thought three time
    times today together told took total toward true try trying turn turns type types
    typically understand unless usage use used useful uses using usual usually value various
    version want wanted wants way ways whatever whole wide within word words work worked
    working works world worth write written wrong year years yes yet zero often also
    ability abilities advice anybody article articles aspect aspects blog bunch chance
    chances comment comments comparison concept concepts context description detail edit
    element elements everyone everything factor factors feature features folks form forms
    guy guys link links list method methods moment month months motivation note notes
    offer online opinion opinions option options piece pieces possibility possibilities
    purpose reference references site sites situation situations someone somebody source
    sources suggestion suggestions video videos week weeks difference differences
"""
GENERIC_WORDS = frozenset(_GENERIC_TEXT.split())
_REWEIGHED = 60  # terms a parent's name is chosen among
_PHRASE_SHARE = 0.5  # a phrase replaces its word when at least this distinctive


def _content(word: str) -> bool:
    return len(word) >= 3 and word not in STOPWORDS and word not in GENERIC_WORDS


def _term_of(words: Sequence[str]) -> str:
    return " ".join(stem(w) for w in words)


@dataclass
class _Chunk:
    """The candidate terms of one chunk (stems; phrases as "stem stem") and their counts."""

    counts: Counter[str] = field(default_factory=Counter)

    @property
    def terms(self) -> Any:
        """The terms (a live view of the counts' keys: no copy)."""
        return self.counts.keys()


@dataclass
class Vocabulary:
    """Term statistics of a set of chunks: how each term is spelled, and how noun-like it is."""

    chunks: list[_Chunk] = field(default_factory=list)
    spellings: dict[str, Counter[str]] = field(default_factory=dict)
    uses: Counter[str] = field(default_factory=Counter)
    after_determiner: Counter[str] = field(default_factory=Counter)
    phrase_final: Counter[str] = field(default_factory=Counter)

    @classmethod
    def of(cls, texts: Sequence[str]) -> Vocabulary:
        vocabulary = cls()
        for text in texts:
            vocabulary.chunks.append(vocabulary._read(text))
        return vocabulary

    def _read(self, text: str) -> _Chunk:
        chunk = _Chunk()
        for segment in _BREAK.split(_MARKUP.sub(" ", text)):
            raw = [_without_apostrophe(w) for w in _WORD.findall(segment)]
            lower = [w.lower() for w in raw]
            for index, word in enumerate(lower):
                if not _content(word):
                    continue
                term = stem(word)
                chunk.counts[term] += 1
                self.spellings.setdefault(term, Counter())[raw[index]] += 1
                self.uses[term] += 1
                if index and lower[index - 1] in _DETERMINERS:
                    self.after_determiner[term] += 1
                if index + 1 == len(lower) or not _content(lower[index + 1]):
                    self.phrase_final[term] += 1  # a noun heads its phrase; adjectives lead
                if index + 1 < len(lower) and _content(lower[index + 1]):
                    pair = lower[index : index + 2]
                    phrase = _term_of(pair)
                    chunk.counts[phrase] += 1
                    self.spellings.setdefault(phrase, Counter())[
                        " ".join(raw[index : index + 2])
                    ] += 1
        return chunk

    def spelled(self, term: str) -> str:
        """The term as the text most often writes it, capitalised like a heading."""
        forms = self.spellings.get(term)
        if not forms:
            return term.title()
        lowered: Counter[str] = Counter()
        for form, count in forms.items():
            lowered[form.lower()] += count
        common = min(lowered.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        originals = [f for f in forms if f.lower() == common]
        original = max(originals, key=lambda f: (forms[f], f))
        return " ".join(
            _heading_word(o, c) for o, c in zip(original.split(), common.split(), strict=False)
        )

    def noun_weight(self, term: str) -> float:
        """How much ``term`` reads like a noun, 0.7-1.3 (times 0.3 for -ly, 0.5 for -ed words):
        words that end their phrase ("the grinder.") and follow determiners weigh more than
        words that lead one ("the current state")."""
        words = term.split()
        last = words[-1]
        uses = self.uses.get(last, 0)
        heads = (self.phrase_final.get(last, 0) + 1) / (uses + 2)
        after = (self.after_determiner.get(last, 0) + 1) / (uses + 2)
        weight = 0.7 + 0.3 * heads + 0.3 * min(1.0, 2 * after)
        spelling = self.spelled(last).lower()
        if spelling.endswith("ly"):
            weight *= 0.3
        elif spelling.endswith("ed") and after < 0.2:
            weight *= 0.5
        if len(words) > 1:
            weight *= 1.15  # a phrase that recurs says more than either word
        return weight


def _without_apostrophe(word: str) -> str:
    """A possessive loses its 's ("beer's" -> "beer"); a contraction ("you'll") is dropped."""
    if "'" not in word and "’" not in word:
        return word
    head, _, tail = word.replace("’", "'").partition("'")
    return head if tail.lower() == "s" else ""


def _heading_word(original: str, lowered: str) -> str:
    if original.isupper() and len(original) <= 6:
        return original  # an acronym: IPA, CNOT
    if original[1:] != original[1:].lower():
        return original  # inner capitals: PostgreSQL, iPhone
    return lowered[:1].upper() + lowered[1:]


def _scores(
    vocabulary: Vocabulary, groups: Sequence[Sequence[int]], target: int
) -> list[tuple[float, str]]:
    """(score, term) of group ``target`` against all ``groups``, best first.

    A term's weight in the group: the share of the group's chunks that use it, times
    ``1 + log`` of how often a chunk that uses it does (the topic's own word is repeated; a
    passing word is not), times ``log(1 + A / f)`` (c-TF-IDF: ``f`` counts the chunks of all
    groups using it, ``A`` is the groups' average size), times :meth:`Vocabulary.noun_weight`.
    """
    sizes = [max(1, len(g)) for g in groups]
    average = sum(sizes) / len(sizes)
    everywhere: Counter[str] = Counter()
    for group in groups:
        for index in group:
            everywhere.update(vocabulary.chunks[index].terms)
    chunks_using: Counter[str] = Counter()
    uses: Counter[str] = Counter()
    for index in groups[target]:
        counts = vocabulary.chunks[index].counts
        chunks_using.update(counts.keys())
        uses.update(counts)
    size = sizes[target]
    minimum = 2 if size >= 3 else 1
    scored = []
    for term, count in chunks_using.items():
        if count < minimum or (" " in term and uses[term] < 2):
            continue
        repeated = 1 + math.log(uses[term] / count)
        weight = (count / size) * repeated * math.log(1 + average / everywhere[term])
        scored.append((weight * vocabulary.noun_weight(term), term))
    scored.sort(key=lambda st: (-st[0], st[1]))
    return scored


def _favour_shared(
    vocabulary: Vocabulary, scored: list[tuple[float, str]], children: Sequence[Sequence[int]]
) -> list[tuple[float, str]]:
    """Scores weighed by the share of children that use the term (in a tenth of their chunks):
    a group of beer and coffee answers is better named "Brewing" than "Beer". Only the best
    terms are weighed (a name is one of them)."""
    using: Counter[str] = Counter()
    top = {term for _, term in scored[:_REWEIGHED]}
    for members in children:
        inside: Counter[str] = Counter()
        for index in members:
            inside.update(t for t in vocabulary.chunks[index].counts if t in top)
        using.update(t for t, n in inside.items() if n >= 0.1 * len(members))
    reweighed = [
        (score * (0.5 + 0.5 * using[term] / len(children)), term)
        for score, term in scored[:_REWEIGHED]
    ]
    reweighed.sort(key=lambda st: (-st[0], st[1]))
    return reweighed


def _compose(
    vocabulary: Vocabulary,
    scored: list[tuple[float, str]],
    banned_stems: Collection[str],
    taken: Collection[str],
) -> str | None:
    """The best term not using a banned word and not already a sibling's name; a recurring
    phrase replaces its word when nearly as distinctive ("Neural Network" over "Network")."""
    usable = [(s, t) for s, t in scored if not set(t.split()) & set(banned_stems)]
    for score, term in usable:
        best = term
        if " " not in best:
            phrase = next(
                (
                    t
                    for s, t in usable
                    if " " in t and best in t.split() and s >= _PHRASE_SHARE * score
                ),
                None,
            )
            best = phrase or best
        name = vocabulary.spelled(best)
        if name.casefold() not in taken:
            return name
    return None


def _sampled(shape: TreeShape, per_leaf: int) -> tuple[TreeShape, list[int]]:
    """The shape over at most ``per_leaf`` chunks of each leaf (evenly spread, deterministic),
    and which chunks those are: names are read from a bounded number of texts."""
    chosen: set[int] = set()
    for leaf in set(shape.leaf_of):
        members = shape.nodes[leaf].members
        step = max(1, len(members) // per_leaf)
        chosen.update(members[::step][:per_leaf])
    kept = sorted(chosen)
    position = {chunk: i for i, chunk in enumerate(kept)}
    nodes = tuple(
        TreeNode(n.level, n.parent, tuple(position[m] for m in n.members if m in position))
        for n in shape.nodes
    )
    return TreeShape(nodes, tuple(shape.leaf_of[c] for c in kept)), kept


def name_tree(shape: TreeShape, texts: Sequence[str], *, per_leaf: int = 40) -> list[str]:
    """A name for every node of ``shape`` (``texts[i]`` is chunk i): distinct among siblings,
    never repeating an ancestor's words. Read from at most ``per_leaf`` texts of each leaf, so
    naming a large store stays bounded."""
    shape, kept = _sampled(shape, per_leaf)
    vocabulary = Vocabulary.of([texts[i] for i in kept])
    names: list[str] = [""] * len(shape.nodes)
    by_parent: dict[int | None, list[int]] = {}
    for index, node in enumerate(shape.nodes):
        by_parent.setdefault(node.parent, []).append(index)
    by_level: dict[int, list[int]] = {}
    for index, node in enumerate(shape.nodes):
        by_level.setdefault(node.level, []).append(index)
    for index, node in enumerate(shape.nodes):  # parents come first
        siblings = by_parent[node.parent]
        peers = siblings if len(siblings) > 1 else by_level[node.level]
        groups = [shape.nodes[i].members for i in peers]
        scored = _scores(vocabulary, groups, peers.index(index))
        children = by_parent.get(index, [])
        if len(children) > 1:  # a parent's name should speak for all its children
            scored = _favour_shared(vocabulary, scored, [shape.nodes[c].members for c in children])
        ancestors = shape.path(index)[:-1]
        banned = {stem(w.lower()) for a in ancestors for w in _WORD.findall(names[a])}
        taken = {names[s].casefold() for s in siblings if names[s]}
        taken |= {names[a].casefold() for a in ancestors}
        names[index] = _compose(vocabulary, scored, banned, taken) or _fallback(taken)
    return names


def name_path(
    text: str,
    others: Sequence[str],
    depth: int,
    *,
    exclude: Collection[str] = (),
    avoid: Collection[str] = (),
) -> list[str]:
    """Names for a new path of ``depth`` categories holding ``text`` alone: its most
    distinctive terms against ``others`` (texts of the rest of the store), broadest first, each
    level a different term; the top name differs from the names in ``exclude`` and no name uses
    the words of the names in ``avoid`` (the path above it)."""
    vocabulary = Vocabulary.of([text, *others])
    groups = [[0], list(range(1, len(others) + 1))] if others else [[0]]
    scored = _scores(vocabulary, groups, 0)
    names: list[str] = []
    banned = {stem(w.lower()) for name in avoid for w in _WORD.findall(name)}
    taken = {e.casefold() for e in exclude}
    for _ in range(depth):
        name = _compose(vocabulary, scored, banned, taken) or _fallback(taken)
        names.append(name)
        banned |= {stem(w.lower()) for w in _WORD.findall(name)}
        taken = {n.casefold() for n in names}
    return names


def _fallback(taken: Collection[str]) -> str:
    for name in ("General", "Other", "Miscellaneous"):
        if name.casefold() not in taken:
            return name
    number = 2
    while f"notes {number}" in taken:
        number += 1
    return f"Notes {number}"
