"""What the rules believe of a user from one message (memory/claims): the issue's own wrong beliefs are not
made, what a user plainly says of themselves is, objects are whole phrases — Chinese, English and both mixed."""

import pytest

from memory.anchoring import is_anaphoric
from memory.claims import find
from memory.vocabulary import load_vocabulary

VOCABULARY = load_vocabulary()


def beliefs(text):
    return {(c.relation, c.object) for c in find(text, VOCABULARY)}


@pytest.mark.parametrize("text", [
    "我住在哪里？", "我喜欢什么？", "你知道我最喜欢去哪儿玩吗？", "如果我有钱，我想住在海边",
    "I want to ask you, what motivates you?", "That's what I like to hear!", "I love your commitment.",
    "I'm happy to help", "When I'm stressed, I always turn to music.", "I like it", "我喜欢这个",
    "哈哈我爱死你了，这个办法太好使了！", "I'm Fine.", "I'm Canadian.", "我是王者",
])
def test_questions_conditions_reactions_and_pronouns_make_no_belief(text):
    assert beliefs(text) == set()


@pytest.mark.parametrize(("text", "expected"), [
    ("They call me Carrot Top, and I really don't like that name.", set()),
    ("My name is Li Wei", {("name", "Li Wei")}),
    ("我今年17岁，喜欢物理", {("age", "17"), ("likes", "物理")}),
    ("我最喜欢的颜色是蓝色", {("likes", "蓝色")}),
    ("I'm from Los Angeles, born and raised", {("location", "Los Angeles")}),
    ("我挺喜欢华为Mate60这款手机的。", {("likes", "华为Mate60")}),
    ("我喜欢安静的咖啡馆，不太喜欢那种网红店。", {("likes", "安静的咖啡馆"), ("dislikes", "网红店")}),
    ("我今年三十五了，腰一直不太好。", {("age", "35")}),
    ("您好，我是李娜，上周跟您约过看房的。", {("name", "李娜")}),
    ("I'm Priya, by the way. Nice to meet you!", {("name", "Priya")}),
    ("我在深圳做产品经理，已经干了五年了。", {("location", "深圳"), ("occupation", "产品经理")}),
    ("I'm fluent in Spanish and Portuguese", {("language", "Spanish"), ("language", "Portuguese")}),
    ("I prefer not to watch any films involving graphic violence.", {("dislikes", "graphic violence")}),
    ("I strongly prefer to avoid caffeine in all forms.", {("dislikes", "caffeine")}),
    ("My headphones arrived cracked.", {("issue_history", "headphones"), ("product_owned", "headphones")}),
    ("I got into Georgia Tech!! starting in the fall", {("school", "Georgia Tech")}),
    ("I'm 28，在 Google 上海做 PM。", {("age", "28")}),
])
def test_what_a_user_says_of_themselves_is_believed_whole(text, expected):
    assert beliefs(text) == expected


@pytest.mark.parametrize(("text", "kin"), [
    ("My mom says I'm lazy, but I just keep odd hours.", "mom"),
    ("我妈说我太懒了。", "妈"),
    ("我表姐在银行上班，她说现在定期利率很低。", "表姐"),
])
def test_reported_speech_says_nothing_of_the_user_but_who_their_family_is(text, kin):
    assert beliefs(text) == {("family", kin)}


def test_what_points_at_the_other_sides_words_is_anchored_or_not_made():
    # "这种讲法" is the assistant's way of explaining: the pipeline anchors it to what the session named, or drops it
    [(relation, obj)] = beliefs("谢谢你！讲得好清楚，我就喜欢这种讲法")
    assert is_anaphoric(obj)
