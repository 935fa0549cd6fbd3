"""Text rules shared by the generator and the validator (stdlib only).

The paraphrase rule keeps questions from copying the wording of the message that answers them, which would make
lexical retrieval trivial.  English: after lowercasing and dropping stopwords and cue terms, a question may not share
``EN_RUN`` or more letters with its gold message, either as a common stem inside two words ("interval"/"intervals")
or as a run of identical consecutive words ("next month"); spaces and punctuation are ignored.  Chinese: no shared
run of ``ZH_RUN`` consecutive CJK characters.  Mixed texts get both checks.
"""

import re

EN_RUN = 6
ZH_RUN = 4

STOPWORDS = frozenset("""
a about above after again against all am an and any are aren't as at be because been before being below between
both but by can could did didn't do does doesn't doing don't down during each few for from further had has have
having he her here hers herself him himself his how i i'm i've i'd i'll if in into is isn't it it's its itself just
let's me more most my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that that's the their theirs them themselves then there these they this those through to
too under until up very was wasn't we we're were what what's when where which while who whom why will with would
you you're your yours yourself yourselves also again ok okay yeah really still got get gets one thing things
""".split())

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


def cjk_share(text: str) -> float:
    """Share of CJK characters among letters and CJK characters (0 for pure English)."""
    cjk = len(_CJK.findall(text))
    latin = len(re.findall(r"[A-Za-z]", text))
    return cjk / (cjk + latin) if cjk + latin else 0.0


def _strip_cues(text: str, cues) -> str:
    out = text.lower()
    for cue in sorted((c for c in cues if c), key=len, reverse=True):
        out = out.replace(cue.lower(), " | ")
    return out


def en_words(text: str, cues=()) -> list[str]:
    """Lowercased content words (stopwords dropped); cue terms are cut out and leave a ``|`` boundary."""
    words = []
    for part in _strip_cues(text, cues).split("|"):
        words += [w for w in _WORD.findall(part) if w not in STOPWORDS]
        words.append("|")
    return words[:-1]


def _en_shared(query: str, gold: str, cues=()) -> str:
    """Longest shared English wording: a common stem inside two words, or a run of identical consecutive words
    (measured in letters, so spaces and punctuation are ignored)."""
    qw, gw = en_words(query, cues), en_words(gold, cues)
    best = max((_longest_common(a, b) for a in set(qw) - {"|"} for b in set(gw) - {"|"}), key=len, default="")
    prev = [(0, 0)] * (len(gw) + 1)  # (letters, words) of the shared word run ending here
    for i in range(1, len(qw) + 1):
        cur = [(0, 0)] * (len(gw) + 1)
        for j in range(1, len(gw) + 1):
            if qw[i - 1] == gw[j - 1] != "|":
                letters, words = prev[j - 1]
                cur[j] = (letters + len(qw[i - 1]), words + 1)
                if cur[j][0] > len(best.replace(" ", "")):
                    best = " ".join(qw[i - cur[j][1]:i])
        prev = cur
    return best


def cjk_runs(text: str, cues=()) -> list[str]:
    return _CJK_RUN.findall(_strip_cues(text, cues))


def _longest_common(a: str, b: str) -> str:
    """Longest common substring (simple DP; texts here are short)."""
    best, best_end = 0, 0
    prev = [0] * (len(b) + 1)
    for i in range(1, len(a) + 1):
        cur = [0] * (len(b) + 1)
        ai = a[i - 1]
        for j in range(1, len(b) + 1):
            if ai == b[j - 1]:
                cur[j] = prev[j - 1] + 1
                if cur[j] > best:
                    best, best_end = cur[j], i
        prev = cur
    return a[best_end - best:best_end]


def shared_run(query: str, gold: str, cues=()) -> str | None:
    """Return the offending shared run if the query copies the gold's wording, else None."""
    en = _en_shared(query, gold, cues)
    if len(en.replace(" ", "")) >= EN_RUN:
        return en
    gold_runs = cjk_runs(gold, cues)
    for run in cjk_runs(query, cues):
        for i in range(len(run) - ZH_RUN + 1):
            gram = run[i:i + ZH_RUN]
            if any(gram in g for g in gold_runs):
                return gram
    return None


def fact_position(session_index: int, n_sessions: int) -> str:
    """early = first 20% of a user's sessions, late = last 20%, middle = the rest."""
    edge = -(-n_sessions // 5)  # ceil(n/5)
    if session_index < edge:
        return "early"
    if session_index >= n_sessions - edge:
        return "late"
    return "middle"
