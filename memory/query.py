"""What a recall query asks: its main cue, the context around it, and the time it points at.

Agents often send a few turns of dialogue as the query. The theme of the whole dialogue then drowns the
cue that matters (the name or the object in the user's latest turn), so the latest user turn is the main
cue and the rest is context. A single turn, however long, is its own cue: on real conversations a long
turn's last question ("What's next?") says less than the whole turn (``bench/recall_dev.py``, realmem
+0.04 R@10 once long turns were no longer cut to it). Temporal phrases ("上周", "last summer",
"3天前") become a soft time window over event time (``client_ts``), relative to ``now``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

DAY = 86400.0

_SPEAKER = re.compile(r"^\s*([^\s:：]{1,24}(?: [^\s:：]{1,24})?)\s*[:：]\s*(.+)$")
_USER_SPEAKERS = re.compile(r"^(?:user|human|me|customer|student|用户|我|客户|学生|q)$", re.I)
_ASSISTANT_SPEAKERS = re.compile(r"^(?:assistant|ai|bot|agent|system|助手|助理|客服|老师|a)$", re.I)


@dataclass(frozen=True)
class Cue:
    main: str
    context: str = ""
    window: tuple[float, float] | None = None  # unix seconds [start, end] the query points at

    @property
    def is_split(self) -> bool:
        return bool(self.context)


#: "…, sorry, what I really want to ask is: X": the speaker sets aside what came before and asks X
_REAL_QUESTION = re.compile(
    r"(?:我(?:真正|真的|其实|实际上|本来)?(?:想问|要问|想说|想知道)的(?:问题)?是|我(?:真正|真的|实际)的问题是|言归正传|说正经的"
    r"|what i (?:really|actually) (?:want|meant|wanted|need) to (?:ask|know)(?: is)?|my (?:real|actual) question is"
    r"|(?:but|anyway),? (?:the )?(?:real|actual) question is)\s*[:：,，]?\s*", re.I)


def parse(query: str, now: float) -> Cue:
    query = query.strip()
    if (found := _last(_REAL_QUESTION, query)) is not None and query[found.end():].strip():
        main = query[found.end():].strip()  # what the speaker set aside says nothing of when, either
        return Cue(main=main, context=query[:found.start()].strip(), window=time_window(main, now))
    main, context = _split(query)
    return Cue(main=main, context=context, window=time_window(main, now) or time_window(query, now))


def _last(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    found = None
    for found in pattern.finditer(text):  # noqa: B007 - the last match is the one wanted
        pass
    return found


def _split(query: str) -> tuple[str, str]:
    turns = _turns(query)
    if turns:
        users = [i for i, (speaker, _) in enumerate(turns) if _USER_SPEAKERS.match(speaker)]
        if not users:  # named speakers (a dialogue between people): the last one who is not the assistant
            users = [i for i, (speaker, _) in enumerate(turns) if not _ASSISTANT_SPEAKERS.match(speaker)]
        last = users[-1] if users else len(turns) - 1
        context = "\n".join(text for i, (_, text) in enumerate(turns) if i != last)
        return turns[last][1], context
    return query, ""


def _turns(query: str) -> list[tuple[str, str]]:
    """Lines of the form ``speaker: text``; [] unless at least two lines are such turns."""
    lines = [line for line in query.splitlines() if line.strip()]
    turns = []
    for line in lines:
        found = _SPEAKER.match(line)
        if found:
            turns.append((found.group(1).strip(), found.group(2).strip()))
        elif turns:  # a turn that runs over several lines
            turns[-1] = (turns[-1][0], f"{turns[-1][1]} {line.strip()}")
    return turns if len(turns) >= 2 else []


# --- time -------------------------------------------------------------------------------------------

_ZH_NUM = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10,
           "几": 3, "半": 0.5}
_EN_NUM = {"a": 1, "an": 1, "one": 1, "two": 2, "couple of": 2, "a couple of": 2, "three": 3, "few": 3,
           "a few": 3, "four": 4, "five": 5, "six": 6, "several": 4}
_UNIT_DAYS = {"天": 1, "日": 1, "周": 7, "星期": 7, "礼拜": 7, "个月": 30, "月": 30, "年": 365,
              "day": 1, "week": 7, "month": 30, "year": 365}
_SEASONS = {"春": (3, 5), "夏": (6, 8), "秋": (9, 11), "冬": (12, 2),
            "spring": (3, 5), "summer": (6, 8), "autumn": (9, 11), "fall": (9, 11), "winter": (12, 2)}
_MONTHS = {m: i for i, m in enumerate(["january", "february", "march", "april", "may", "june", "july", "august",
                                         "september", "october", "november", "december"], 1)}

#: (pattern, (days back to the window's start, days back to its end)) for fixed phrases
_FIXED = tuple((re.compile(p, re.I), span) for p, span in [
    (r"今天|今早|今晚|刚才|刚刚|\btoday\b|this morning|tonight|earlier today|just now", (1, 0)),
    (r"昨天|昨晚|昨日|\byesterday\b|last night", (2.5, 0.5)),
    (r"前天|day before yesterday", (3.5, 1.5)),
    (r"上周|上个?星期|上个?礼拜|last week|a week ago", (15, 4)),
    (r"这周|本周|这个?星期|this week", (8, 0)),
    (r"上个?月|last month|a month ago", (62, 20)),
    (r"这个月|本月|this month", (32, 0)),
    (r"最近|近来|这几天|recently|lately|the other day|past few days", (15, 0)),
])
_YEARS = tuple((re.compile(p, re.I), span) for p, span in [
    (r"去年|last year|a year ago", (730, 300)),
    (r"今年|this year", (366, 0)),
])
_AGO_ZH = re.compile(r"([一两二三四五六七八九十几半\d]+)\s*(个月|天|日|周|星期|礼拜|年)(?:前|以前|之前)")
_AGO_EN = re.compile(r"\b(\d+|a couple of|a few|couple of|few|several|an?|one|two|three|four|five|six)\s+"
                     r"(day|week|month|year)s?\s+ago\b", re.I)
_SEASON = re.compile(r"(去年|今年|last|this)?\s*(?:的)?\s*(春|夏|秋|冬|spring|summer|autumn|fall|winter)(?:天|季)?",
                     re.I)
_MONTH_ZH = re.compile(r"(去年|今年)?\s*(1[0-2]|[1-9]|十[一二]?|[一二三四五六七八九])月(?:份)?(?!\d)")
_MONTH_EN = re.compile(r"\b(?:in|last|this|back in|during)\s+(" + "|".join(_MONTHS) + r")\b", re.I)
_NAMES = "|".join(_MONTHS)
#: A date or month with its year: "May 7, 2023", "7 May 2023", "August 2022", "2022年8月(3日)", "in 2022", "2022年"
_DATE_EN = re.compile(rf"\b(?:({_NAMES})\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+((?:19|20)\d\d)|(\d{{1,2}})(?:st|nd|rd|th)?"
                      rf"\s+(?:of\s+)?({_NAMES}),?\s+((?:19|20)\d\d))\b", re.I)
_MONTH_YEAR_EN = re.compile(rf"\b({_NAMES}),?\s+(?:of\s+)?((?:19|20)\d\d)\b", re.I)
_DATE_ZH = re.compile(r"((?:19|20)\d\d)\s*年\s*(1[0-2]|0?[1-9])\s*月(?:\s*(3[01]|[12]\d|0?[1-9])\s*[日号])?")
_YEAR = re.compile(r"(?:\b(?:in|during|back in|throughout)\s+((?:19|20)\d\d)\b(?!\s*[-/])"
                   r"|((?:19|20)\d\d)\s*年(?!\s*\d))", re.I)


def time_window(text: str, now: float) -> tuple[float, float] | None:
    """The span of time a phrase in ``text`` points at, with some slack, or None. A date with its year
    wins over a relative phrase."""
    if (dated := _dated(text)) is not None:
        return dated[0], min(dated[1], now)
    found = _AGO_ZH.search(text)
    if found:
        n = _zh_amount(found.group(1))
        return _around(now, n * _UNIT_DAYS[found.group(2)])
    found = _AGO_EN.search(text)
    if found:
        amount = found.group(1).lower()
        n = float(amount) if amount.isdigit() else _EN_NUM.get(amount, 1)
        return _around(now, n * _UNIT_DAYS[found.group(2).lower()])
    for pattern, (start, end) in _FIXED:
        if pattern.search(text):
            return now - start * DAY, now - end * DAY
    found = _MONTH_ZH.search(text)
    if found and not re.search(r"\d\s*月\s*\d|月\s*[一二三四五六七八九十]+[日号]", text[found.start():found.end() + 4]):
        return _month_span(now, int(_zh_amount(found.group(2))), found.group(1) == "去年")
    found = _MONTH_EN.search(text)
    if found:
        return _month_span(now, _MONTHS[found.group(1).lower()], False)
    found = _SEASON.search(text)
    if found and (found.group(1) or re.search(r"(?:天|季)|\b(?:in|during|over) the\b", text)):
        first, last = _SEASONS[found.group(2).lower()]
        return _season_span(now, first, last, (found.group(1) or "").lower() in ("去年", "last"))
    for pattern, (start, end) in _YEARS:
        if pattern.search(text):
            return now - start * DAY, now - end * DAY
    return None


def _dated(text: str) -> tuple[float, float] | None:
    """The span a date or month given with its year names (a day ± 2 days, a month ± 3 days, a year)."""
    if found := _DATE_ZH.search(text):
        year, month, day = int(found.group(1)), int(found.group(2)), found.group(3)
        return _day_span(year, month, int(day)) if day else _year_month_span(year, month)
    if found := _DATE_EN.search(text):
        name, date, given = (found.group(1), found.group(2), found.group(3)) if found.group(1) else \
            (found.group(5), found.group(4), found.group(6))
        month = _MONTHS[name.lower()]
        return _day_span(int(given), month, int(date)) if 1 <= int(date) <= 31 else _year_month_span(int(given), month)
    if found := _MONTH_YEAR_EN.search(text):
        return _year_month_span(int(found.group(2)), _MONTHS[found.group(1).lower()])
    if found := _YEAR.search(text):
        year = int(found.group(1) or found.group(2))
        start, end = datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
        return start.timestamp() - 7 * DAY, end.timestamp() + 7 * DAY
    return None


def _day_span(year: int, month: int, day: int) -> tuple[float, float] | None:
    try:
        start = datetime(year, month, day, tzinfo=UTC)
    except ValueError:  # 31 February: the month then
        return _year_month_span(year, month)
    return start.timestamp() - 2 * DAY, start.timestamp() + 3 * DAY


def _year_month_span(year: int, month: int) -> tuple[float, float]:
    start = datetime(year, month, 1, tzinfo=UTC) - timedelta(days=3)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC) + timedelta(days=3)
    return start.timestamp(), end.timestamp()


def _zh_amount(text: str) -> float:
    if text.isdigit():
        return float(text)
    if text.startswith("十"):
        return 10 + _ZH_NUM.get(text[1:], 0) if len(text) > 1 else 10
    if "十" in text:
        tens, _, ones = text.partition("十")
        return _ZH_NUM.get(tens, 1) * 10 + _ZH_NUM.get(ones, 0)
    return float(_ZH_NUM.get(text, 1))


def _around(now: float, days: float) -> tuple[float, float]:
    slack = max(1.5, days * 0.35)
    return now - (days + slack) * DAY, now - max(0.0, days - slack) * DAY


def _month_span(now: float, month: int, last_year: bool) -> tuple[float, float]:
    today = datetime.fromtimestamp(now, UTC)
    year = today.year - 1 if last_year or month > today.month else today.year
    start, end = _year_month_span(year, month)
    return start, min(end, now)


def _season_span(now: float, first: int, last: int, last_year: bool) -> tuple[float, float]:
    today = datetime.fromtimestamp(now, UTC)
    year = today.year - 1 if last_year or (first > today.month and first != 12) else today.year
    if first == 12:  # winter runs over the new year
        year = year - 1 if today.month < 12 or last_year else year
    start = datetime(year, first, 1, tzinfo=UTC)
    end_year = year + 1 if last < first else year
    end = datetime(end_year + (last == 12), last % 12 + 1, 1, tzinfo=UTC)
    return start.timestamp() - 7 * DAY, min(end.timestamp() + 7 * DAY, now)
