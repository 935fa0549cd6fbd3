"""What a recall query asks (memory.query): its main cue, its context, the time it points at."""

from datetime import UTC, datetime

import pytest

from memory.query import DAY, parse, time_window

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC).timestamp()


def test_a_plain_query_is_its_own_cue():
    cue = parse("我上次说的那家拉面店叫什么？", NOW)
    assert (cue.main, cue.context, cue.window) == ("我上次说的那家拉面店叫什么？", "", None)


@pytest.mark.parametrize("dialogue, main", [
    ("user: I've been planning the trip to Japan a lot\nassistant: Great, where to?\n"
     "user: what was the name of the ramen place Mei loved?", "what was the name of the ramen place Mei loved?"),
    ("用户：最近在整理旅行照片\n助手：好呀，整理到哪了？\n用户：我表姐推荐的那家民宿叫什么来着",
     "我表姐推荐的那家民宿叫什么来着"),
    ("User: my sister is visiting\nAssistant: Nice!\nUser: she asked about the restaurant\nAssistant: Which one?",
     "she asked about the restaurant"),
    ("Caroline: I went to the LGBTQ support group yesterday\nMelanie: How was it?", "How was it?"),
])
def test_the_latest_user_turn_of_a_dialogue_is_the_main_cue(dialogue, main):
    cue = parse(dialogue, NOW)
    assert cue.main == main and cue.context and main not in cue.context


@pytest.mark.parametrize("query, main", [
    ("上周的聚会真开心，菜也好吃。不好意思，我真正想问的是：我家猫叫什么名字？", "我家猫叫什么名字？"),
    ("最近总下雨，心情一般。其实我想问的是，周三的牙医预约几点？", "周三的牙医预约几点？"),
    ("The weather was lovely last week, we went hiking. Anyway, what I really want to know is: where does my "
     "cousin work?", "where does my cousin work?"),
])
def test_a_question_the_speaker_says_they_really_mean_is_the_main_cue(query, main):
    cue = parse(query, NOW)
    assert cue.main == main and cue.context and main not in cue.context
    assert cue.window is None  # the small talk set aside says nothing of when


def test_a_long_single_turn_query_is_its_own_cue():
    query = ("I have been thinking about my kitchen renovation for weeks now, comparing tiles and cabinets, and I keep "
             "going back and forth between the options we discussed, the oak and the walnut, and the budget keeps "
             "creeping up beyond what I wanted to spend on it this year. Which contractor did my neighbour recommend?")
    cue = parse(query, NOW)
    assert cue.main == query and not cue.context


@pytest.mark.parametrize("phrase, days_back", [
    ("上周我说的那个餐厅", 7), ("what did I say last week about the gym", 7), ("昨天提到的那本书", 1),
    ("yesterday's plan", 1), ("3天前我跟你说过", 3), ("two weeks ago I told you", 14), ("上个月的体检", 30),
    ("a few days ago", 3), ("两个月前", 60),
])
def test_temporal_phrases_point_at_a_window_around_that_time(phrase, days_back):
    start, end = time_window(phrase, NOW)
    assert start <= NOW - days_back * DAY <= end and end <= NOW


@pytest.mark.parametrize("phrase, month", [("last summer we went hiking", 7), ("去年夏天去的那个海岛", 7),
                                           ("in March I started the course", 3), ("今年3月份开始的项目", 3)])
def test_seasons_and_months_point_at_their_span(phrase, month):
    start, end = time_window(phrase, NOW)
    middle = datetime.fromtimestamp((start + end) / 2, UTC)
    assert abs(middle.month - month) <= 1 and end <= NOW


@pytest.mark.parametrize("phrase, first, last", [
    ("what did Caroline do in August 2022?", "2022-08-01", "2022-08-31"),
    ("2022年8月我们去了哪里", "2022-08-01", "2022-08-31"),
    ("the concert on May 7, 2023, who came?", "2023-05-07", "2023-05-07"),
    ("7th May 2023 at the beach", "2023-05-07", "2023-05-07"),
    ("2023年5月7日说的那件事", "2023-05-07", "2023-05-07"),
    ("what did I study in 2021?", "2021-01-01", "2021-12-31"),
    ("2021年学了什么", "2021-01-01", "2021-12-31"),
    ("last week of August 2022", "2022-08-01", "2022-08-31"),  # a date with its year wins over a relative phrase
])
def test_a_date_with_its_year_points_at_that_day_month_or_year(phrase, first, last):
    start, end = time_window(phrase, NOW)
    day = datetime.fromisoformat
    assert start <= day(f"{first}T00:00+00:00").timestamp() and day(f"{last}T23:59+00:00").timestamp() <= end
    assert end - start <= (366 + 15) * DAY


@pytest.mark.parametrize("text", ["我喜欢春卷", "room 2021 is free", "the 2023-05-07 build", "the dates are 3月14号",
                                  "Springfield is nice", "when did I start?"])
def test_words_that_only_look_temporal_point_nowhere(text):
    assert time_window(text, NOW) is None
