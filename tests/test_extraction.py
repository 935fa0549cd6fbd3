import pytest

from memory.claims.zh import zh_number
from memory.extraction import extract
from memory.models import EventType, Message, Relation, Role
from memory.text import clean


def run(text: str, role: Role = Role.user):
    m = Message(tenant="t", user_id="u", session_id="s", message_id="m1", role=role, content=clean(text),
                client_ts=1.0)
    return extract(m)


def facts(text: str) -> set[tuple[str, str]]:
    return {(f.relation, f.object) for f in run(text).facts}


def types(text: str, role: Role = Role.user) -> set[str]:
    return {e.event_type.value for e in run(text, role).events}


@pytest.mark.parametrize(("text", "expected"), [
    ("我今年17岁，上高二", {("age", "17"), ("grade", "高二")}),
    ("我今年十七岁", {("age", "17")}),
    ("I'm 16 years old and I'm in 10th grade", {("age", "16"), ("grade", "10th grade")}),
    ("我叫小明。", {("name", "小明")}),
    ("My name is Alice", {("name", "Alice")}),
    ("我喜欢用动画学物理", {("likes", "用动画学物理")}),
    ("I love chemistry", {("likes", "chemistry")}),
    ("我不喜欢背单词", {("dislikes", "背单词")}),
    ("I can't stand homework", {("dislikes", "homework")}),
    ("我总把加速度和速度搞混", {("learning_obstacle", "加速度"), ("learning_obstacle", "速度")}),
    ("I always mix up velocity and acceleration",
     {("learning_obstacle", "velocity"), ("learning_obstacle", "acceleration")}),
    ("I don't understand Lenz's law", {("learning_obstacle", "Lenz's law")}),
    ("I prefer short answers", {("response_preference", "short answers")}),
    ("回答简短一点", {("response_preference", "简短")}),
])
def test_declarations_become_facts(text, expected):
    assert facts(text) == expected


@pytest.mark.parametrize(("text", "kind"), [
    ("我今年17岁", "age_declaration"), ("我叫小明", "identity"), ("我喜欢物理", "preference"),
    ("我讨厌数学", "dislike"), ("我不懂三角函数", "concept_confusion"), ("请用简单的例子", "request"),
    ("please use simple examples", "request"), ("你好！", "greeting"), ("hello", "greeting"),
    ("哈哈", "small_talk"), ("我想考上清华大学", "goal"), ("I'm so stressed", "emotion"),
    ("点了提交按钮没反应", "operation_failure"), ("这个解释很清楚，谢谢", "feedback"),
    ("你上次说的那个例子变量名叫什么", "question"), ("What is torque?", "question"),
])
def test_message_is_typed(text, kind):
    assert kind in types(text)


def test_every_message_becomes_at_least_one_event():
    assert types("今天天气不错") == {"statement"}
    assert types("The bus was late.") == {"statement"}
    assert types("首先算出速度的变化量，然后除以时间。变量名叫 dv。", Role.assistant) == {"plan"}
    assert types("Newton's second law relates force and acceleration.", Role.assistant) == {"statement"}


def test_negation_is_not_a_like():
    assert ("likes", "数学") not in facts("我不喜欢数学")
    assert not any(r == "likes" for r, _ in facts("I don't like long videos"))


def test_events_are_deterministic_and_well_formed():
    a, b = run("我总把加速度和速度搞混，怎么办？"), run("我总把加速度和速度搞混，怎么办？")
    assert [e.event_id for e in a.events] == [e.event_id for e in b.events]
    for e in a.events:
        assert EventType(e.event_type) and len(e.keywords) <= 3 and len(e.summary) <= 50
        assert e.message_ids == ["m1"] and len(e.text_hash) == 64
    assert {f.relation for f in a.facts} == {Relation.learning_obstacle}


def test_zh_number():
    assert [zh_number(x) for x in ["十七", "二十", "两", "17", "一百"]] == [17, 20, 2, 17, None]


@pytest.mark.parametrize("text, weight", [
    ("What's a good dinner idea?", 0.7), ("今天吃什么好？", 0.7), ("怎么退款", 0.7),
    ("What should I cook for my sister tonight?", 1.0), ("我家猫不吃饭怎么办？", 1.0),
    ("谢谢！那下一步呢？", 1.0), ("I moved to Ottawa last month", 1.0),
])
def test_a_question_that_says_nothing_about_the_user_weighs_less(text, weight):
    """Asking the assistant something general is a weak memory of the user; a personal question is not."""
    assert {e.weight for e in run(text).events} == {weight}


@pytest.mark.parametrize(("text", "goal"), [
    ("我的目标是下个月通过雅思", "下个月通过雅思"),
    ("我的目标：每天背50个单词", "每天背50个单词"),
    ("我今年的目标就是考上北大", "考上北大"),
    ("我的goal是考上MIT", "考上MIT"),
    ("My goal is to run a marathon this year", "run a marathon"),
    ("My main goal for this year is to read 20 books.", "read 20 books"),
    ("my goal: pass the IELTS", "pass the IELTS"),
])
def test_a_stated_goal_is_a_goal(text, goal):
    assert types(text) == {"goal"}
    assert facts(text) == {("goal", goal)}


@pytest.mark.parametrize("text", [
    "my goal keeper is great", "My goalkeeper saved it", "他说这个目标太远了", "他的目标是考清华",
    "我们的目标是赢", "我的目标是什么来着？", "What is my goal?", "My goal is unclear",
])
def test_talk_about_goals_that_states_none_of_the_users_is_no_goal(text):
    assert not any(r == "goal" for r, _ in facts(text)) and "goal" not in types(text)


@pytest.mark.parametrize(("text", "preference"), [
    ("请简短回答", "简短"), ("别给我讲太长的", "简短"), ("简单点回答就行", "简短"), ("说短一点", "简短"),
    ("回答别太长", "简短"), ("长话短说吧", "简短"), ("简短一点！", "简短"), ("别啰嗦", "简短"),
    ("keep your answers short", "short answers"), ("please answer briefly", "short answers"),
    ("Could you keep your replies concise?", "short answers"), ("Keep it short, please", "short answers"),
    ("Be brief.", "short answers"), ("your answers are way too long", "short answers"),
    ("以后please answer briefly，谢谢", "short answers"),
])
def test_asking_for_short_answers_is_a_response_preference(text, preference):
    assert ("response_preference", preference) in facts(text)
    assert "preference" in types(text)


@pytest.mark.parametrize("text", [
    "the short answer is no", "简短回答：不行", "简短地说，我不同意", "In short, no", "The short answers were wrong",
    "My speech should be brief", "you should keep it short", "变量名不要太长", "老师说不要写太长", "别走太长的路",
])
def test_a_short_answer_or_a_short_thing_is_no_response_preference(text):
    assert not any(r == "response_preference" for r, _ in facts(text))


def test_asking_for_ones_own_name_is_not_a_name():
    assert facts("我叫什么？") == set() and facts("我的名字是什么") == set() and facts("我叫谁来着") == set()
    assert facts("我叫李雷。") == {("name", "李雷")}
