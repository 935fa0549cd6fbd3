"""The vocabulary as configuration (``memory.vocabulary``): the default file covers a general assistant,
tutoring, customer service and private-domain operations; a deployment's own file changes what is kept — its
rules, the LLM stage's schema, the API — with no code change; a broken file fails at once, saying what to fix."""

import time

import httpx
import pytest
from mneme_client import MnemeClient

from memory.errors import ConfigurationError
from memory.extraction import extract
from memory.llm import system_prompt
from memory.models import EventType, Message, Role
from memory.vocabulary import Vocabulary, load_vocabulary
from tests.stacks import running_stack

PETS = """
default_half_life_days = 20
[categories]
profile = { half_life_days = 400 }
household = { half_life_days = 200, description = "the user's home" }
[relations.name]
category = "profile"
single_valued = true
[relations.pet]
category = "household"
description = "an animal the user keeps"
[[relations.pet.rules]]
event_type = "identity"
confidence = 0.85
patterns = [
  '我(?:养了|家有)(?:一只|一条|只|条)?\\s*(猫|狗|兔子|仓鼠|鹦鹉)',
  '(?i)\\bi have an? (cat|dog|rabbit|hamster|parrot)\\b',
]
"""


def said(text: str, vocabulary: Vocabulary | None = None, role: Role = Role.user) -> tuple[set, set]:
    message = Message(tenant="t", user_id="u", session_id="s", message_id="m1", role=role, content=text,
                      client_ts=1.0)
    found = extract(message, vocabulary)
    return {(f.relation, f.object) for f in found.facts}, {e.event_type for e in found.events}


@pytest.mark.parametrize(("text", "fact"), [
    ("我是一名护士", ("occupation", "护士")),
    ("I work as a software engineer at Acme", ("occupation", "software engineer")),
    ("我住在杭州", ("location", "杭州")), ("I live in New York City", ("location", "New York City")),
    ("我这边是UTC+8", ("timezone", "UTC+8")), ("My timezone is Europe/Berlin", ("timezone", "Europe/Berlin")),
    ("请用英文回答", ("language", "英文")), ("My native language is Spanish", ("language", "Spanish")),
    ("我有一个女儿，今年上初二", ("family", "女儿")), ("I have two kids", ("family", "kids")),
    ("请用微信联系我", ("contact_preference", "微信")), ("contact me by email please", ("contact_preference", "email")),
    ("我买了你们的扫地机器人X10", ("product_owned", "扫地机器人X10")),
    ("I'm on the Pro plan", ("product_owned", "Pro")),
    ("我的订单号是A2024-8891", ("order_history", "A2024-8891")),
    ("Order #88123 hasn't arrived", ("order_history", "88123")),
    ("我的耳机坏了", ("issue_history", "耳机")), ("My phone arrived cracked", ("issue_history", "phone")),
    ("我是保守型投资者", ("risk_preference", "保守")), ("my risk tolerance is high", ("risk_preference", "high")),
])
def test_the_default_vocabulary_finds_what_service_and_operations_agents_need_in_both_languages(text, fact):
    assert fact in said(text)[0]


@pytest.mark.parametrize("text", ["I have a question about my order", "I speak to my boss every day",
                                  "我是说这个题目太难了", "my risk is that I fail", "I live in fear of exams"])
def test_the_default_rules_do_not_read_facts_into_ordinary_sentences(text):
    facts, _ = said(text)
    assert not {r for r, _ in facts} & {"family", "language", "occupation", "risk_preference", "location"}


def test_a_deployments_own_file_changes_what_is_kept_without_code(tmp_path):
    path = tmp_path / "pets.toml"
    path.write_text(PETS, encoding="utf-8")
    pets = Vocabulary.load(path)
    assert pets.names == ["name", "pet"] and pets.half_life_days("pet") == 200
    assert said("我养了一只猫", pets) == ({("pet", "猫")}, {EventType.identity})
    assert said("I have a dog, and I like chemistry", pets)[0] == {("pet", "dog")}  # likes is not kept here
    assert said("我喜欢化学", pets)[1] == {EventType.preference}  # the event stays, the fact does not
    assert said("我叫李雷", pets)[0] == {("name", "李雷")}  # built-in rules keep to the relations it names
    prompt = system_prompt(pets)
    assert "- pet: an animal the user keeps" in prompt and "- likes" not in prompt
    assert said("I have a dog", pets, role=Role.assistant)[0] == set()  # only the user's words are about them


@pytest.mark.parametrize(("change", "complaint"), [
    (lambda t: t.replace('category = "household"', 'category = "home"'), "category 'home'"),
    (lambda t: t + '\n[relations.cat]\ncategory = "household"\nopposite = "pet"\n', "opposite 'pet'"),
    (lambda t: t.replace("(猫|狗|兔子|仓鼠|鹦鹉)", "(猫|狗"), "not a regular expression"),
    (lambda t: t.replace("(cat|dog|rabbit|hamster|parrot)", "cat"), "needs a group"),
    (lambda t: t.replace('event_type = "identity"', 'event_type = "pets"'), "event_type"),
    (lambda t: t.replace("relations.pet", "relations.Pet"), "names must be"),
    (lambda t: t.replace("[categories]", "[categories"), "vocabulary file"),
])
def test_a_broken_file_fails_at_load_naming_the_file_and_what_to_fix(tmp_path, change, complaint):
    path = tmp_path / "broken.toml"
    path.write_text(change(PETS), encoding="utf-8")
    with pytest.raises(ConfigurationError, match=complaint) as err:
        Vocabulary.load(path)
    assert str(path) in err.value.message


def test_the_default_file_is_read_once_and_names_its_source():
    assert load_vocabulary() is load_vocabulary("") and load_vocabulary().source.endswith("vocabulary.toml")


@pytest.fixture(scope="module")
def pet_stack(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "pets.toml"
    path.write_text(PETS, encoding="utf-8")
    with running_stack(tmp_path_factory, "pets", MNEME_CONSENT_REQUIRED="false",
                       MNEME_VOCABULARY_FILE=str(path)) as s:
        yield s


def test_a_stack_run_with_its_own_vocabulary_keeps_its_relations_end_to_end(pet_stack):
    with MnemeClient(pet_stack.api_url) as client:
        job = client.remember(user_id="owner", session_id="s1", message_id="m1", role="user",
                              content="我养了一只猫，我喜欢化学", client_ts=time.time()).job_id
        assert client.wait([job])[0].state == "done"
        assert {(b.relation, b.object) for b in client.profile("owner").beliefs} == {("pet", "猫")}
        listed = httpx.get(f"{pet_stack.api_url}/v1/vocabulary").json()
        assert [r["name"] for r in listed["relations"]] == ["name", "pet"] and listed["source"].endswith("pets.toml")
        corrected = httpx.put(f"{pet_stack.api_url}/v1/users/owner/beliefs", json={"relation": "pet", "object": "狗"})
        assert corrected.status_code == 200 and corrected.json()["category"] == "household"
        refused = httpx.put(f"{pet_stack.api_url}/v1/users/owner/beliefs", json={"relation": "likes", "object": "x"})
        assert refused.status_code == 400 and "name, pet" in refused.json()["message"]
