"""Purpose-bound consent's arithmetic (``memory.purposes``): which memories serve which purpose, and how a
withdrawal and a new grant change it, without any server."""

import pytest

from memory.errors import InvalidInput
from memory.purposes import ANY, Grants, checked
from memory.settings import Settings


def test_a_memory_serves_a_purpose_only_while_the_grant_it_was_collected_under_stands():
    first = Grants({"tutoring": 1, "support": 1})
    recorded = first.collected()
    assert recorded == ["support#1", "tutoring#1"]
    assert first.serves(recorded, "tutoring") and first.serves(recorded, "support")
    withdrawn = Grants({"tutoring": -1, "support": 1})
    assert not withdrawn.serves(recorded, "tutoring") and withdrawn.serves(recorded, "support")
    assert withdrawn.purposes_of(recorded) == ["support"]
    again = Grants({"tutoring": 2, "support": 1})  # granted again after the withdrawal: a new grant
    assert not again.serves(["tutoring#1"], "tutoring") and again.serves(["tutoring#2"], "tutoring")
    assert again.serves(recorded) and not again.serves(["tutoring#1"])  # any purpose: support#1 stands


def test_what_was_kept_before_purposes_existed_serves_each_purpose_until_its_first_withdrawal():
    assert Grants({"tutoring": 1, "support": 1}).serves([ANY], "tutoring")
    assert not Grants({"tutoring": 2, "support": 1}).serves([ANY], "tutoring")
    assert Grants({"tutoring": 2, "support": 1}).serves([ANY])  # support is still at its first grant
    assert not Grants({"tutoring": -1}).serves([ANY])


def test_a_purpose_not_granted_is_served_by_nothing():
    grants = Grants({"tutoring": 1})
    assert grants.serving("support") == [] and not grants.serves([ANY, "support#1"], "support")
    assert Grants().serving() == [] and not Grants().serves([ANY])
    assert grants.granted == ["tutoring"] and Grants({"tutoring": -3}).withdrawn == ["tutoring"]


def test_a_caller_names_only_the_deployments_purposes():
    assert checked(["support", "tutoring", "support"], ["tutoring", "support"]) == ["support", "tutoring"]
    with pytest.raises(InvalidInput, match=r"unknown purpose\(s\) \['marketing'\].*\['support', 'tutoring'\]"):
        checked(["marketing"], ["tutoring", "support"])


def test_the_purposes_are_configured_by_name():
    assert Settings(_env_file=None).purposes == ["personalisation", "tutoring", "support", "analytics"]
    assert Settings(_env_file=None, purposes=["support", "support", "billing"]).purposes == ["support", "billing"]
    for bad in (["Tutoring"], ["a b"], [], ["x#1"]):
        with pytest.raises(ValueError):
            Settings(_env_file=None, purposes=bad)
