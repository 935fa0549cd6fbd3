"""Recall as a long-term user meets it, through the real API and workers: nothing is lost to the cap,
specifics win over chit-chat, one hit per message (merged or not), never an empty answer while memories
exist, a ranking that does not depend on k, mixed languages, dialogue-shaped and temporal queries."""

import time

import httpx
import pytest
from mneme_client import MnemeClient

from memory.episodic import ALL_STATUSES
from memory.mneme import Mneme
from tests.stacks import running_stack

DAY = 86400.0

THINGS = ["kettle", "umbrella", "notebook", "lamp", "backpack", "scarf", "blender", "chess set", "yoga mat",
          "phone case", "teapot", "desk fan", "water bottle", "cookbook", "rain jacket"]
PLACES = ["market", "mall", "corner shop", "airport", "station", "bookshop", "hardware store", "outlet",
          "pharmacy", "flea market", "supermarket", "department store", "garden centre", "bazaar", "kiosk",
          "second-hand shop", "museum shop", "night market", "craft fair", "pop-up store"]


def post(client, user, items, session="s1"):
    """items: (message_id, role, text, client_ts); returns the finished jobs."""
    jobs = [client.remember(user_id=user, session_id=f"{user}-{session}", message_id=m, role=role, content=text,
                            client_ts=ts).job_id for m, role, text, ts in items]
    done = client.wait(jobs, timeout=300)
    assert all(job.state == "done" for job in done), [job.error for job in done if job.state != "done"]
    return done


def ids_of(result):
    return [m for hit in result.events for m in hit.message_ids]


@pytest.fixture(scope="module")
def small_layer(tmp_path_factory):
    """A stack whose event layer holds 20 events per user, so a test overflows it with a few dozen messages."""
    with running_stack(tmp_path_factory, "small-layer", MNEME_EVENTS_CAP="20", MNEME_CONSENT_REQUIRED="false") as s:
        with MnemeClient(s.api_url) as c:
            yield s, Mneme(s.settings), c


def test_a_fact_said_early_stays_findable_after_the_event_layer_overflows(small_layer, uid):
    stack, runtime, client = small_layer
    user, start = f"u{uid}", time.time() - 200 * DAY
    items = [("fact", "user", "My locker combination at the gym is 4-19-27", start)]
    for i in range(80):  # four times the layer: thanks and everyday talk, months of it
        thing, place = THINGS[i % len(THINGS)], PLACES[i % len(PLACES)]
        text = f"Thanks, the tip about the {thing} helped!" if i % 2 else f"I bought a {thing} at the {place} today"
        items.append((f"m{i}", "user", text, start + (i + 1) * 3600 * 12))
    post(client, user, items)
    result = client.recall(user_id=user, query="what's the code for my gym locker?", k=5)
    assert "fact" in ids_of(result)[:3], ([h.summary for h in result.events], result.degraded, result.notes)
    rows = [e for e, _ in runtime.episodic.store.dump("default", user, statuses=ALL_STATUSES, limit=10_000)]
    assert 18 <= runtime.episodic.store.live_count("default", user) <= 20 and len(rows) == 81  # none deleted
    evicted = {e.event_type.value for e in rows if e.status == "evicted"}
    assert "feedback" in evicted
    # thanks leave first: a statement leaves only at an overflow with no thank-you left in the layer, so every
    # statement evicted came before the oldest thank-you still there (which batches the messages travelled in
    # decides when overflows come, not this)
    oldest_thanks = min((e.ts for e in rows if e.status == "live" and e.event_type.value == "feedback"),
                        default=float("inf"))
    assert all(e.ts < oldest_thanks for e in rows if e.status == "evicted" and e.event_type.value == "statement")
    live = [e.event_type.value for e in rows if e.status == "live"]  # oldest first would leave as many of each
    assert live.count("feedback") <= live.count("statement") // 2, live

    # the forgetting the design names covers the deep tier too: delete-by-type, then erasure
    httpx.delete(f"{stack.api_url}/v1/users/{user}/events", params={"event_type": "small_talk"}).raise_for_status()
    rows = [e for e, _ in runtime.episodic.store.dump("default", user, statuses=ALL_STATUSES, limit=10_000)]
    assert rows and not [e for e in rows if e.event_type.value == "small_talk"]
    receipt = client.erase(user)
    assert receipt.complete and receipt.remaining["episodic_events"] == 0
    assert runtime.episodic.store.dump("default", user, statuses=ALL_STATUSES, limit=1) == []


def test_a_rare_name_beats_chit_chat_the_embedder_likes(client, uid):
    user, now = f"u{uid}", time.time() - DAY
    items = [(f"c{i}", "user", text, now + i) for i, text in enumerate(
        ["Thanks, that helps!", "What should I cook tonight?", "Any tips for dinner?", "Thanks so much!",
         "What's a good dinner idea?", "Can you suggest something to cook?"])]
    items.append(("fact", "user", "Kowalczyk from accounting lent me his pressure cooker last week", now + 10))
    post(client, user, items)
    result = client.recall(user_id=user, query="whose pressure cooker do I still have? Kowalczyk's?", k=5)
    assert ids_of(result)[0] == "fact", [(h.summary, h.why) for h in result.events]


def test_a_message_of_several_event_types_is_one_hit(client, uid):
    user = f"u{uid}"
    [job] = post(client, user, [("m1", "user", "谢谢你的解释，那动量守恒的条件是什么？", time.time() - 60)])
    assert len(job.event_ids) >= 2  # typed as feedback and as a question
    result = client.recall(user_id=user, query="动量守恒的条件", k=5)
    assert ids_of(result).count("m1") == 1 and len(result.events) == 1


def test_a_query_with_no_good_answer_still_gets_the_best_memories_flagged_weak(client, uid):
    user, now = f"u{uid}", time.time() - DAY
    post(client, user, [(f"m{i}", "user", text, now + i) for i, text in enumerate(
        ["我在学吉他，最近练C和弦", "I practise the guitar every evening", "我喜欢弹民谣"])])
    related = client.recall(user_id=user, query="我在练什么乐器？", k=5)
    assert related.events and not related.notes
    assert not related.events[0].weak and related.events[0].relevance >= max(e.relevance for e in related.events)
    unrelated = client.recall(user_id=user, query="quarterly tax filing deadline for my LLC", k=5)
    assert len(unrelated.events) == 3 and all(e.weak for e in unrelated.events)  # never an empty answer
    assert unrelated.notes == ["no memory matches the query strongly: every event recalled is flagged weak"]
    cut = max(e.relevance for e in unrelated.events) + 0.01
    strict = client.recall(user_id=user, query="quarterly tax filing deadline for my LLC", k=5, min_relevance=cut)
    assert not strict.events and strict.notes == ["no memory reaches min_relevance"]  # the caller's choice


def test_the_first_ten_of_fifty_are_the_ten(client, uid):
    user, now = f"u{uid}", time.time() - 30 * DAY
    items = [(f"m{i}", "user", f"I bought a {THINGS[i % len(THINGS)]} at the {PLACES[i % len(PLACES)]}", now + i)
             for i in range(70)]
    post(client, user, items)
    for query in ("where did I buy the teapot?", "shopping at the market", "我在哪里买的东西"):
        fifty = client.recall(user_id=user, query=query, k=50)
        ten = client.recall(user_id=user, query=query, k=10)
        assert len(fifty.events) == 50 and ids_of(fifty)[:10] == ids_of(ten), query


def test_a_merged_message_is_still_found_as_itself(client, uid):
    """Near-identical messages merge into one event; each is still a hit of its own, and a reply of the
    assistant never merges into the user's message."""
    user, now = f"u{uid}", time.time() - 2 * DAY
    post(client, user, [("a", "user", "My sister's bakery on Elm Street is doing great", now),
                        ("b", "user", "My sister's bakery on Elm Street is doing really great", now + 60),
                        ("c", "assistant", "My sister's bakery on Elm Street is doing great", now + 120)])
    result = client.recall(user_id=user, query="how is my sister's bakery doing?", k=5)
    by_id = {hit.message_ids[0]: hit for hit in result.events}
    assert set(by_id) == {"a", "b", "c"}, [(h.message_ids, h.merged_into) for h in result.events]
    assert {by_id["a"].merged_into, by_id["b"].merged_into} == {None, by_id["a"].event_id}, (
        "the later message merged into the first one's event")
    assert by_id["c"].merged_into is None and by_id["c"].role == "assistant"


def test_the_message_just_posted_is_not_recalled_as_the_past(client, uid):
    user, session = f"u{uid}", "s1"
    post(client, user, [("old", "user", "我家的猫叫年糕，今年三岁", time.time() - 30 * DAY)], session="s0")
    post(client, user, [("now", "user", "我家的猫叫什么名字来着？", time.time())], session=session)
    with_session = client.recall(user_id=user, session_id=f"{user}-{session}", query="我家的猫叫什么名字来着？", k=5)
    assert "now" not in ids_of(with_session) and ids_of(with_session)[0] == "old"
    assert [m.message_id for m in with_session.working] == ["now"]
    without = client.recall(user_id=user, query="我家的猫叫什么名字来着？", k=5)  # no session: by its text and age
    assert "now" not in ids_of(without)


def test_an_other_language_memory_that_matches_best_reaches_the_top(client, uid):
    user, now = f"u{uid}", time.time() - DAY
    english = ["I need to book a dentist appointment next week", "My manager wants the quarterly report by Friday",
               "I should call my landlord about the heating", "The printer at work is broken again",
               "I want to learn how to swim this summer", "My bike tyre went flat on the way home"]
    items = [(f"e{i}", "user", text, now + i) for i, text in enumerate(english)]
    items.append(("zh", "user", "我对花生过敏，吃了会起疹子", now + 10))
    post(client, user, items)
    result = client.recall(user_id=user, query="What food am I allergic to? I need to tell the restaurant", k=3)
    assert ids_of(result)[0] == "zh", [(h.summary, h.why) for h in result.events]


def test_a_dialogue_shaped_query_follows_its_latest_user_turn(client, uid):
    user, now = f"u{uid}", time.time() - 20 * DAY
    post(client, user, [(f"m{i}", "user", text, now + i) for i, text in enumerate(
        ["We're planning a family trip to Italy in the spring", "My sister Giulia recommended a tiny trattoria "
         "in Bologna called Da Nello", "I booked flights to Rome for April", "We want to see the Colosseum"])])
    dialogue = ("user: I'm getting excited about the Italy trip\nassistant: Rome in April sounds great!\n"
                "user: which restaurant did my sister tell me to try?")
    result = client.recall(user_id=user, query=dialogue, k=3)
    assert ids_of(result)[0] == "m1", [(h.summary, h.why) for h in result.events]


def test_a_temporal_query_prefers_what_was_said_then(client, uid):
    user, now = f"u{uid}", time.time()
    post(client, user, [
        ("spring", "user", "我在读《三体》，读到第二部了", now - 90 * DAY),
        ("lastweek", "user", "我在读《百年孤独》，刚开始读", now - 7 * DAY),
    ])
    result = client.recall(user_id=user, query="上周我说在读哪本书？", k=2)
    assert ids_of(result)[0] == "lastweek", [(h.summary, h.why) for h in result.events]
    assert result.events[0].why["in_time_window"] == 1.0


def test_client_ts_in_milliseconds_is_read_as_milliseconds(client, uid):
    user, when = f"u{uid}", time.time() - 3 * DAY
    [job] = post(client, user, [("m1", "user", "I started the new job at the bakery", when * 1000)])
    result = client.recall(user_id=user, query="when did I start at the bakery?", k=1)
    assert abs(result.events[0].ts - when) < 1


def test_a_reply_is_found_by_what_it_answered(client, uid):
    """A reply names nothing of its subject ("Go with 180°C for 50 minutes"): the turn before it does."""
    user, now = f"u{uid}", time.time() - 5 * DAY
    pairs = [("How many sets should I do for squats at the gym?", "Three sets of ten, with two minutes of rest."),
             ("Roasting pork belly tonight, what temperature and for how long?",
              "Go with 180°C for 50 minutes, then let it rest for ten."),
             ("Which train should I take to the office on Monday?", "Take the 7:40 from platform two, it is fastest.")]
    items = [item for i, (asked, said) in enumerate(pairs)
             for item in ((f"q{i}", "user", asked, now + 2 * i), (f"a{i}", "assistant", said, now + 2 * i + 1))]
    post(client, user, items)
    result = client.recall(user_id=user, query="How long did you say to roast the pork belly, and how hot?", k=5)
    replies = [m for m in ids_of(result) if m.startswith("a")]
    assert replies[:1] == ["a1"], [(h.summary, h.why) for h in result.events]
