"""Re-scoring a belief from the evidence that remains (``SemanticMemory.retract``), on a real SQLite graph:
what the remaining evidence gives, relative to what all of it gave, applied to the confidence the belief has
today (decayed) — so a deletion neither revives nor ages a belief."""

import time

import pytest

from memory.graph import Evidence, MergeMode, RelationKey, Status
from memory.graph.sqlite import SQLiteGraphStore
from memory.models import FactSource, Relation
from memory.provenance import Messages
from memory.purposes import Grants
from memory.services.semantic import SemanticMemory
from memory.settings import Settings
from memory.vocabulary import decayed, load_vocabulary

DAY = 86400.0


def claim(evidence_id: str, message_id: str, confidence: float = 0.7,
          source: FactSource = FactSource.rule, session_id: str | None = None) -> Evidence:
    return Evidence(evidence_id=evidence_id, source=source, confidence=confidence, message_ids=[message_id],
                    session_id=session_id, ts=time.time())


@pytest.fixture
def beliefs(tmp_path) -> tuple[SemanticMemory, SQLiteGraphStore, RelationKey]:
    store = SQLiteGraphStore(tmp_path / "graph.db")
    settings = Settings(_env_file=None, data_dir=tmp_path)
    key = RelationKey(tenant="t", user_id="u", relation=Relation.likes, concept_id="chemistry", object="chemistry")
    # retract reads and writes only the graph: no reviews, no trail
    every = Grants(dict.fromkeys(settings.purposes, 1))
    return (SemanticMemory(store, None, None, settings, load_vocabulary(), lambda *_: every),  # type: ignore[arg-type]
            store, key)


def test_a_belief_a_month_old_is_re_scored_from_todays_confidence(beliefs):
    semantic, store, key = beliefs
    store.merge(key, claim("e1", "m1"), MergeMode.blend)
    store.scale(store.relations("t", "u")[0].rel_id, claim("c2", "m2", source=FactSource.counter_evidence), 0.5)
    [rel] = store.relations("t", "u")
    month_ago = time.time() - 30 * DAY
    assert store.materialise(rel.rel_id, rel.confidence, month_ago, rel.updated_at)  # as the nightly decay leaves it
    today = decayed(0.35, 30, load_vocabulary().half_life_days(Relation.likes))

    [change] = semantic.retract("t", "u", Messages.of_session("s1", ["m2"]))  # "I don't like chemistry" taken back

    assert (change.action, change.before) == ("rescore", pytest.approx(0.35))
    assert change.after == pytest.approx(today * 0.7 / 0.35, rel=1e-3)  # twice today's: m2's ×0.5 undone
    [now] = store.relations("t", "u")
    assert now.base_ts > month_ago + 29 * DAY  # the value is today's: its decay clock restarts now
    assert semantic.retract("t", "u", Messages.of_session("s1", ["m2"])) == []  # again: nothing


def test_a_human_value_is_not_moved_by_a_deletion_of_rule_evidence(beliefs):
    semantic, store, key = beliefs
    store.merge(key, claim("e1", "m1", 0.7), MergeMode.blend)
    store.merge(key, claim("e2", "m2", 0.7), MergeMode.blend)
    store.merge(key, Evidence(evidence_id="h1", source=FactSource.human, confidence=0.9, ts=time.time()),
                MergeMode.human)

    [change] = semantic.retract("t", "u", Messages.of_session("s1", ["m2"]))

    assert (change.action, change.after) == ("rescore", pytest.approx(0.9))  # the human's word stands
    assert store.relations("t", "u", statuses=[Status.active])[0].confidence == pytest.approx(0.9)


def test_a_belief_only_the_deleted_messages_held_is_retired_not_re_scored(beliefs):
    semantic, store, key = beliefs
    store.merge(key, claim("e1", "m1"), MergeMode.blend)
    [change] = semantic.retract("t", "u", Messages.of_session("s1", ["m1"]), why="deleted with session s1")
    assert change.action == "retire"
    [retired] = store.relations("t", "u", statuses=[Status.retired])
    assert [r.note for r in store.evidence([retired.rel_id])][-1] == "message m1 deleted with session s1: " \
                                                                        "nothing else supports it"


def test_the_same_message_id_of_another_session_still_holds_the_belief(beliefs):
    semantic, store, key = beliefs
    store.merge(key, claim("e1", "m1", 0.6, session_id="s1"), MergeMode.blend)
    store.merge(key, claim("e2", "m1", 0.8, session_id="s2"), MergeMode.blend)  # both sessions' first message

    [change] = semantic.retract("t", "u", Messages.of_session("s2", ["m1"]))

    assert change.action == "rescore" and change.after == pytest.approx(0.6, rel=1e-3)  # s1's m1 alone
    assert semantic.retract("t", "u", Messages.of_session("s2", ["m1"])) == []  # again: nothing
    [change] = semantic.retract("t", "u", Messages.of_session("s1", ["m1"]))
    assert change.action == "retire"
