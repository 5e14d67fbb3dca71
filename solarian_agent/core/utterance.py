"""What an operator's message means for routing: the offline router's reading (a message's
meaning, not fixed rules, decides whether it interrupts, queues or is answered in parallel).

The reading is by meaning, not by a first-word pattern: a message is cut into clauses (at
punctuation and at "but" / "and then" / "de" / "aztán" ...), and each clause is read for

* a **safety warning** ("Watch out, a person is reaching in!", "Vigyázz, valaki benyúl!"):
  an interrupt that stops everything;
* a **stop** ("stop", "cancel the paper pick", "Azonnal állj le!", "hagyd abba", "mégse"),
  unless it is negated ("don't stop now", "ne állj meg"), deferred ("stop after the cup",
  "stop when you reach the tray") or an errand ("stop by the bin"); a stop names what it
  stops: the words after its verb ("the paper pick"), minus what a later clause keeps
  ("but keep the cup");
* a **wait** or a **correction** ("wait", "várj", "no, the other cup", "rosszul mondtam"):
  an interrupt that stops nothing (the planner re-decides at once);
* a **side question** (the time, the weather, how it is going, where a thing is) that needs
  no action: answered in parallel;

and everything else (an addition to the task, an errand for later) is queued.  Matching works
on accent-folded words, so "allj le" reads as "állj le".  The resolution of a stop's words to
running actions is :func:`matching_actions`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

URGENT, QUEUE, SIDE = "interrupt", "queue", "parallel"


@dataclass(frozen=True)
class Reading:
    """How the offline rules read one operator message."""

    urgency: str  # interrupt | queue | parallel
    rule: str  # which reading decided (user_safety, user_stop, user_wait, ...)
    reason: str
    stop: bool = False
    targets: tuple[str, ...] = ()  # canonical words naming what to stop; () = everything
    keep: tuple[str, ...] = ()  # canonical words naming what must go on


def fold(text: str) -> str:
    """Lower case without accents: "Állj LE" -> "allj le"."""
    nfkd = unicodedata.normalize("NFKD", text.lower().replace("\u2019", "'"))
    return "".join(c for c in nfkd if not unicodedata.combining(c))


WORD_RE = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
# clause breaks: punctuation, and the conjunctions that start a new thought
CLAUSE_RE = re.compile(r"[,.;:!?\n]+|\s(?:but|and then|then|except|however|de|hanem|aztan|"
                       r"majd|viszont|kiveve)\s")


def _words(text: str) -> list[str]:
    return WORD_RE.findall(fold(text))


def _clauses(text: str) -> list[list[str]]:
    folded = " " + fold(text) + " "
    out: list[list[str]] = []
    pos = 0
    for m in CLAUSE_RE.finditer(folded):
        out.append(WORD_RE.findall(folded[pos:m.start()]))
        # a conjunction itself opens the next clause (it decides keep / except)
        pos = m.start() if m.group().strip() and m.group().strip()[0].isalpha() else m.end()
    out.append(WORD_RE.findall(folded[pos:]))
    return [c for c in out if c]


def _has(words: Sequence[str], phrase: str) -> int:
    """Index just after the first occurrence of ``phrase`` (words) in ``words``, else -1."""
    p = phrase.split()
    for i in range(len(words) - len(p) + 1):
        if all(words[i + k] == p[k] or (p[k].endswith("*") and words[i + k].startswith(
                p[k][:-1])) for k in range(len(p))):
            return i + len(p)
    return -1


def _first(words: Sequence[str], phrases: Iterable[str]) -> tuple[int, int]:
    """(start, end) of the earliest phrase found in ``words``; (-1, -1) when none is."""
    best = (-1, -1)
    for ph in phrases:
        end = _has(words, ph)
        if end >= 0:
            start = end - len(ph.split())
            if best[0] < 0 or start < best[0]:
                best = (start, end)
    return best


# vocabulary (accent-folded) ------------------------------------------------------------------
STOP_PHRASES = (
    "stop", "stop it", "halt", "cancel", "abort", "freeze", "quit", "never mind",
    "forget it", "emergency", "kill it", "call it off", "cut it out", "give up", "estop",
    "pause", "don't move", "dont move", "do not move", "stop moving", "ne mozdulj",
    "ne mozogj", "szunet", "szunetelj",
    "that's enough", "thats enough", "enough already", "enough now",
    "allj", "alljon", "allj meg", "allj le", "allitsd le", "allitsd meg", "allitsa le",
    "alljatok", "hagyd abba", "hagyja abba", "abbahagy*", "megse", "leall*",
    "megall*", "felejtsd el", "veszleall*", "eleg lesz", "eleg volt", "eleg mar", "ebbol eleg",
)
# "enough" / "elég" stop only on their own ("enough!"); "elég nehéz" is "quite heavy"
STOP_ALONE = ("enough", "eleg")
# a "stop" that is not one: an errand ("stop by the bin") or a verb of something else
ERRANDS = ("stop by", "stop off", "stop over", "stop at", "stop in", "stop for")
NOT_A_STOP = ("stop believing", "enough time", "enough room", "enough space", "eleg hely",
              "eleg ido")
NEGATIONS = ("don't", "dont", "do not", "never", "not", "no need to", "no reason to",
             "needn't", "mustn't", "shouldn't", "won't", "without", "ne", "nem", "sose",
             "soha", "nem kell", "ne is")
# a deferral before the verb ("then stop", "when it is up, stop") or after it ("stop once the
# cup is on the tray"): a stop for later, queued as an instruction
DEFER_BEFORE = ("after", "afterwards", "when", "once", "until", "till", "before", "if",
                "later", "then", "next", "miutan", "utan", "utana", "ha", "amikor", "mielott",
                "kesobb", "majd", "aztan")
DEFER_AFTER = ("after", "afterwards", "when", "once", "until", "till", "if", "later",
               "at the end", "miutan", "utan", "ha", "amikor", "kesobb", "vegen")
# a stop verb inside a question about the past ("did you stop?"): no stop
ASKED = ("did", "why", "how", "have", "has", "does", "miert", "mikor", "hogyan")
CONTINUE = ("keep going", "carry on", "go on", "continue", "proceed", "keep at it",
            "keep working", "folytasd", "folytassa", "csak igy tovabb", "mehet", "menj tovabb",
            "haladj")
KEEP_WORDS = ("keep", "leave", "not", "except", "continue", "let", "finish", "tartsd",
              "hagyd", "kiveve", "folytasd", "ne", "nem")
WAIT_PHRASES = ("wait", "hold on", "hang on", "one moment", "one sec", "just a moment",
                "just a sec", "a moment", "varj", "varjal", "varjon", "varjatok", "pillanat",
                "egy pillanat", "allj csak")
# "wait" that is an instruction for later, not an interruption
WAIT_INSTRUCTION = ("wait for", "wait until", "wait till", "wait before", "wait a few",
                    "wait an", "wait one", "wait two", "wait five", "wait ten", "varj amig",
                    "varj meg", "varj egy kicsit")
UNTIL = ("until", "till", "amig", "mig", "ameddig")
CORRECTIONS = ("no", "nope", "not that", "wrong", "actually", "instead", "i meant", "i mean",
               "i said it wrong", "my mistake", "sorry i meant", "the other", "nem", "nem az",
               "nem azt", "nem a", "rosszul", "tevedtem", "inkabb", "helyette", "megis",
               "a masik", "bocs")
# pain is a warning too: "ouch", "it hurts", "au", "jaj", "fáj"
SAFETY_ALERTS = ("watch out", "look out", "danger", "dangerous", "mind the", "mind your",
                 "fire", "smoke", "veszely*", "tuz", "fust", "ouch", "ow", "it hurts",
                 "you're hurting", "au", "jaj", "faj", "fajt")
# "careful" alone is a warning; "be careful with the cup" is an instruction
WEAK_ALERTS = ("careful", "be careful", "caution", "ovatosan", "ovatos", "vigyazz",
               "vigyazat")
PEOPLE = ("person", "someone", "somebody", "hand", "hands", "child", "kid", "people",
          "finger", "fingers", "cat", "dog", "valaki", "kez", "keze*", "kezem*", "gyerek*",
          "ember", "ujj*", "macska", "kutya")
INTRUSION = ("reaching", "reaches", "reach in", "in the way", "in there", "touching",
             "benyul*", "belenyul*", "utban", "ott van", "bent van")
NOBODY = ("nobody", "no one", "noone", "no person", "nothing", "senki", "semmi", "don't worry",
          "dont worry", "no need", "ne aggodj", "nyugi")
SMALL_TALK = ("what time", "the time", "what's the time", "what day", "what date",
              "today's date", "how are you", "who are you", "your name", "weather",
              "what can you do", "a joke", "thank you", "thanks",
              "hany ora", "mennyi az ido", "milyen ido", "milyen nap", "hanyadika",
              "hogy vagy", "ki vagy", "koszonom", "kosz", "idojaras")
STATUS_QUESTIONS = ("how is it going", "how's it going", "how far", "how long", "what are you",
                    "progress", "are you done", "status", "what's left", "what is left",
                    "where is", "where's", "what do you see", "what can you see", "is the",
                    "are the", "did you", "have you", "do we have", "do you have", "is there",
                    "are there", "how many", "hany", "van meg", "hogy allsz", "hol tartasz",
                    "mit csinalsz",
                    "mennyi van", "hol van", "mit latsz", "kesz vagy", "sikerult", "meddig")
QUESTION_WORDS = ("what", "what's", "how", "how's", "where", "where's", "when", "who", "which",
                  "is", "are", "did", "do", "does", "have", "has", "can", "could", "mi", "mit",
                  "hogy", "hol", "mikor", "ki", "melyik", "hany", "mennyi", "milyen", "kesz",
                  "sikerult", "meddig")
# a question that asks for an action: "can you put the cup on the tray?"
REQUESTS = ("can you", "could you", "would you", "will you", "please", "can i ask you to",
            "tudnad", "tudnal", "lennel", "kerlek")
# words that name no particular action: a stop of "it" / "everything" / "the arm" stops all
_GENERIC_EN = ("the a an it that this these those one ones now right away please immediately "
               "at once everything all of to with your you current currently task tasks "
               "action actions job move motion movement moving robot arm thing things "
               "whatever doing are is what so just stuff work working running going me my for "
               "on in there here")
_GENERIC_HU = ("az a egy ezt azt most azonnal le meg mindent mindet minden es is kerlek te "
               "feladat feladatot mozgast mozgas robot kart kar munkat itt ott mar rogton")
GENERIC = frozenset(_GENERIC_EN.split() + _GENERIC_HU.split())

# canonical words: the lexicon maps a word (accent-folded, by prefix) to one name
LEXICON: dict[str, tuple[str, ...]] = {
    "pick": ("pick", "grasp", "grab", "lift", "felvet", "felvev", "felemel", "megfog",
             "fogas", "fogd", "vedd"),
    "place": ("place", "put", "drop", "set", "lerak", "letesz", "tedd", "rakd", "helyez"),
    "home": ("home", "haza", "alaphelyzet"),
    "cup": ("cup", "mug", "pohar", "bogre", "csesz"),
    "paper": ("paper", "papir", "galacsin"),
    "ball": ("ball", "labd"),
    "block": ("block", "cube", "kock"),
    "bin": ("bin", "trash", "basket", "kuka", "szemetes", "kosar"),
    "tray": ("tray", "talca"),
    "bottle": ("bottle", "uveg", "palack"),
    "wait": ("wait", "varakoz"),
}


def canonical(word: str) -> str:
    """A word's canonical name: the lexicon's, else the word without an English plural or
    -ing ending ("cups" -> "cup", "picking" -> "pick", "poharat" -> "cup")."""
    w = fold(word)
    for name, stems in LEXICON.items():
        if any(w.startswith(s) for s in stems):
            return name
    for suffix in ("ing", "es", "s"):
        if len(w) > len(suffix) + 2 and w.endswith(suffix):
            base = w[:-len(suffix)]
            for name, stems in LEXICON.items():
                if any(base.startswith(s) for s in stems):
                    return name
            return base
    return w


def descriptor(*texts: str) -> frozenset[str]:
    """The canonical words of an action's tool name, parameters and plan step."""
    out: set[str] = set()
    for t in texts:
        out.update(canonical(w) for w in _words(t.replace("_", " ")))
    return frozenset(out)


def _names(words: Sequence[str]) -> tuple[str, ...]:
    """The canonical words of a stop's object, generic words and verbs left out."""
    skip = GENERIC | {fold(p) for p in STOP_PHRASES if " " not in p} | {
        "abba", "hagyd", "hagyja", "allitsd", "el", "but", "and", "de", "es", "keep", "leave",
        "let", "finish", "except", "kiveve", "tartsd", "folytasd", "ne", "nem", "not",
        "don't", "dont", "only", "csak", "continue", "go", "off", "on", "also", "too"}
    out = [canonical(w) for w in words if w not in skip and not w.isdigit()]
    return tuple(dict.fromkeys(w for w in out if w and w not in GENERIC))


def _negated(words: Sequence[str], at: int) -> bool:
    """A negation within the five words before position ``at`` ("I don't want you to
    stop")."""
    window = list(words[max(0, at - 5):at])
    return any(_has(window, n) >= 0 for n in NEGATIONS)


def _deferred(words: Sequence[str], at: int, end: int) -> bool:
    before, after = list(words[:at]), list(words[end:])
    return any(_has(before, d) >= 0 for d in DEFER_BEFORE) or any(
        _has(after, d) >= 0 for d in DEFER_AFTER)


def _stop_in(words: Sequence[str]) -> tuple[str, int] | None:
    """("stop" | "negated" | "later" | "asked" | "other", end of the verb) when the clause
    has a stop verb; None when it has none."""
    start, end = _first(words, STOP_PHRASES)
    if start < 0:
        if len(words) == 1 and words[0] in STOP_ALONE:
            return ("stop", 1)
        return None
    if _first(words[start:], NOT_A_STOP)[0] == 0:
        return ("other", end)  # "don't stop believing": no stop at all
    if _first(words[start:], ERRANDS)[0] == 0:
        return ("later", end)  # an errand: "stop by the bin"
    if _negated(words, start):
        return ("negated", end)
    if any(w in ASKED for w in words[max(0, start - 3):start]):
        return ("asked", end)  # "did you stop?": a question, not an order
    if _deferred(words, start, end):
        return ("later", end)
    return ("stop", end)


def _safety(words: Sequence[str]) -> bool:
    if _first(words, NOBODY)[0] >= 0:
        return False
    alert = _first(words, SAFETY_ALERTS)[0]
    if alert >= 0 and not _negated(words, alert):
        return True
    weak = _first(words, WEAK_ALERTS)
    if weak[0] >= 0 and len(words) <= weak[1] and not _negated(words, weak[0]):
        return True
    return _first(words, PEOPLE)[0] >= 0 and _first(words, INTRUSION)[0] >= 0


CUT_WORDS = frozenset(("and", "but", "es", "de", "except", "kiveve", "keep", "leave", "let",
                       "finish", "continue", "not", "tartsd", "folytasd"))
NOT_CORRECTIONS = ("no need", "no problem", "no worries", "no rush", "no hurry", "nem kell",
                   "nem baj", "nem gond", "nem siet*")


def _stop_reading(clauses: list[list[str]], i: int, end: int) -> Reading:
    """The stop in clause ``i`` (its verb ends at ``end``): what it names and what it keeps."""
    rest = clauses[i][end:]
    cut = next((k for k, w in enumerate(rest) if w in CUT_WORDS), len(rest))
    targets = _names(rest[:cut])
    keep: list[str] = []
    tails = [rest[cut:], *clauses[i + 1:]]
    for c in tails:
        if any(_has(c, k) >= 0 for k in KEEP_WORDS):
            keep.extend(_names(c))
    # "stop the cup but not the paper": what a clause keeps is never also a target
    tgt = tuple(t for t in targets if t not in keep)
    kept = tuple(dict.fromkeys(keep))
    named = f" ({' '.join(tgt)})" if tgt else ""
    also = f", keeping {' '.join(kept)}" if kept else ""
    return Reading(URGENT, "user_stop", f"the user asks to stop{named}{also}", stop=True,
                   targets=tgt, keep=kept)


def read_message(text: str) -> Reading:
    """The offline reading of one operator message (see the module docstring)."""
    clauses = _clauses(text)
    everything = [w for c in clauses for w in c]
    # a safety warning anywhere wins: the arm stops
    if any(_safety(c) for c in clauses) and _first(everything, NOBODY)[0] < 0:
        return Reading(URGENT, "user_safety", "a safety warning: the arm stops now", stop=True)
    seen: set[str] = set()
    for i, c in enumerate(clauses):
        found = _stop_in(c)
        if found is None:
            continue
        # "when you are done with the cup, stop": a condition in an earlier clause
        if found[0] == "stop" and any(e[0] in DEFER_BEFORE for e in clauses[:i]):
            found = ("later", found[1])
        if found[0] == "stop":
            return _stop_reading(clauses, i, found[1])
        seen.add(found[0])
    lead = clauses[0] if clauses else []
    if "negated" not in seen and lead:
        w_start, _ = _first(lead, WAIT_PHRASES)
        until = len(clauses) > 1 and clauses[1][0] in UNTIL  # "várj, amíg ..."
        if 0 <= w_start <= 1 and _first(lead, WAIT_INSTRUCTION)[0] != w_start \
                and not _negated(lead, w_start) and not until:
            return Reading(URGENT, "user_wait", "the user interrupts: wait")
        if _first(lead, CORRECTIONS)[0] == 0 and _first(lead, NOT_CORRECTIONS)[0] != 0:
            return Reading(URGENT, "user_correction", "the user corrects the robot")
    if "negated" in seen or _first(everything, CONTINUE)[0] >= 0:
        return Reading(QUEUE, "user_continue", "the user says to go on: nothing stops")
    if "later" in seen:
        return Reading(QUEUE, "user_later", "a stop for later or an errand (\"stop by\"): "
                       "queued as an instruction, nothing stops now")
    question = text.rstrip().endswith("?") or bool(lead and lead[0] in QUESTION_WORDS)
    if question and _first(everything, SMALL_TALK)[0] >= 0:
        return Reading(SIDE, "small_talk", "an independent quick question unrelated to the task")
    if question and _first(everything, STATUS_QUESTIONS)[0] >= 0 \
            and _first(lead, REQUESTS)[0] != 0:
        return Reading(SIDE, "side_question", "a question about the task's state: answered on "
                       "the side with read-only tools")
    return Reading(QUEUE, "user_addition", "an addition to the task: delivered at the next "
                   "boundary")


def matching_actions(targets: Sequence[str], keep: Sequence[str],
                     actions: Sequence[tuple[str, frozenset[str]]]) -> tuple[str, ...] | None:
    """The action ids a stop stops.  ``actions``: (action id, descriptor) of what runs.

    No targets and nothing kept: None (every action, including one that starts before the
    stop is carried out).  Targets: the actions whose descriptor has every target word; an
    action whose descriptor has a kept word is never stopped."""
    if not targets and not keep:
        return None
    out = []
    for aid, words in actions:
        if keep and any(k in words for k in keep):
            continue
        if all(t in words for t in targets):
            out.append(aid)
    return tuple(out)


__all__ = ["Reading", "canonical", "descriptor", "fold", "matching_actions", "read_message"]
