"""The package, its docs, README, config and interface files cite no specification document by
its seed number (the word seed followed by a three-digit document number such as 003, a
possessive of it, or a quotation attributed to it): a reader of this repository does not have
those documents, so a comment states the rule and its reason instead.  A random or layout seed
(``seed=3``, ``--seeds 20``, seeds 301-312, a tracker's seed pixel) is not a citation and is
not flagged.  A failure lists every offending file:line.

The examples below write the word as ``~`` so this file does not cite anything itself.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("solarian_agent", "docs", "README.md", "config", "msg", "srv", "action")
MAX_BYTES = 2_000_000  # larger files are data (policies, images), not prose

# matched over the whole text (case-insensitive), so a citation broken across two lines is found
CITATIONS = re.compile(
    # a document number: ~ 003, ~ 004's, ~s 000 and 001, ~003
    r"\bseeds?\s*0\d\d\b"
    # a possessive: ~'s wording, ~'s: (but not a flood-fill tracker's "~'s (flood fill")
    r"|\bseed's\b(?!\s*\()"
    # the document speaking: the ~ calls it, a ~ describes
    r"|\b(?:the|a)\s+seed\s+(?:says|said|calls|describes|defines|asks|requires|wants|"
    r"specifies|names|lists|shows)\b"
    # as the ~ says (not a list of random seeds, nor a seed value or pixel)
    r"|\bas\s+the\s+seed\b(?!\s+(?:list|value|pixel))"
    # a quotation attributed to it: (~: "..."), "~: about 4"
    r"|\(seed:\s*[\"“]|\"seed:\s",
    re.IGNORECASE)


def _s(text: str) -> str:
    return text.replace("~", "seed")


def _texts() -> list[tuple[Path, str]]:
    files: list[Path] = []
    for name in SCANNED:
        p = ROOT / name
        if p.is_file():
            files.append(p)
        elif p.is_dir():
            files += sorted(f for f in p.rglob("*")
                            if f.is_file() and "__pycache__" not in f.parts)
    out = []
    for f in files:
        if f.stat().st_size > MAX_BYTES:
            continue
        data = f.read_bytes()
        if b"\0" in data:
            continue
        try:
            out.append((f, data.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    return out


def citations(text: str) -> list[tuple[int, str]]:
    """(line number, that line) of every citation in ``text``."""
    lines = text.splitlines()
    out = []
    for m in CITATIONS.finditer(text):
        n = text.count("\n", 0, m.start()) + 1
        out.append((n, lines[n - 1].strip() if n <= len(lines) else ""))
    return out


def test_the_pattern_flags_citations_and_not_random_seeds():
    cited = ["(~ 003, \"Monitor questions\")", "~ 004's five tools", "~ 001/000: views",
             "~s 000 and 001", "(~\n004)", "~003", "the ~'s ``agent:`` block",
             "The finish rule is the ~'s: one tick", "The ~ calls it a failure rule",
             "laid out as the ~ describes", "(~: \"Without one, only timeouts\")",
             "\"note\": \"~: about 4\""]
    not_cited = ["~=3", "--~s 20", "the ~ list", "~s 301-312", "(~ 80006: ...)",
                 "~ 7: the rules planner", "close to the ~'s\n(flood fill in Lab)",
                 "def record_episode(~: int, faults: float)", "{\"~\": 42}",
                 "f\"s{~:03d}\"", "(drawn from the ~)", "the ~ colour", "~ 42", "~ed"]
    assert [c for c in map(_s, cited) if not citations(c)] == []
    assert [c for c in map(_s, not_cited) if citations(c)] == []


def test_no_specification_document_is_cited_by_its_seed_number():
    found = [f"{path.relative_to(ROOT)}:{n}: {line}"
             for path, text in _texts() for n, line in citations(text)]
    assert not found, ("state the rule and its reason instead of citing a specification "
                       "document:\n" + "\n".join(found))
