"""The graph contract against a real Bolt server — ArcadeDB from PyPI, started by ``tests/bolt_server.py``
(and against a real Neo4j too when ``MNEME_TEST_NEO4J_URL`` names one, e.g. the docker-compose service) —
plus URLs, error mapping, the stored layout and injection payloads that must stay data."""

from __future__ import annotations

import os
import uuid

import neo4j
import pytest
from pydantic import ValidationError

from memory import ids as mneme_ids
from memory.errors import ConfigurationError, InvalidInput, TransientError
from memory.graph import Evidence, MergeMode, RelationKey, Status
from memory.graph.neo4j import Neo4jGraphStore, Target, parse_url
from memory.models import FactSource, Relation
from memory.registry import BACKENDS, open_backend
from memory.settings import Settings
from tests.bolt_server import USER, BoltServer
from tests.graph_contract import GraphContract
from workers.local.stack import free_port

NEO4J_URL = os.environ.get("MNEME_TEST_NEO4J_URL", "")


@pytest.fixture(scope="module")
def bolt_server():
    with BoltServer() as server:
        yield server


@pytest.fixture(scope="module")
def neo4j_store(bolt_server):
    with Neo4jGraphStore.from_url(bolt_server.url, Settings()) as store:
        yield store


@pytest.fixture(scope="module")
def raw(bolt_server):
    """A plain driver on the same database, to look at what the adapter stored."""
    with neo4j.GraphDatabase.driver(f"bolt://127.0.0.1:{bolt_server.port}", auth=(USER, bolt_server.password)) as d:
        yield lambda query, **params: [r.data() for r in d.execute_query(query, params,
                                                                         database_=bolt_server.database).records]


class TestNeo4jGraph(GraphContract):
    @pytest.fixture
    def store(self, neo4j_store):
        return neo4j_store


@pytest.fixture(scope="module")
def real_neo4j_store():
    with Neo4jGraphStore.from_url(NEO4J_URL, Settings()) as store:
        yield store


@pytest.mark.skipif(not NEO4J_URL, reason="MNEME_TEST_NEO4J_URL not set: no Neo4j can run here; see docker-compose")
class TestRealNeo4jGraph(GraphContract):
    @pytest.fixture
    def store(self, real_neo4j_store):
        return real_neo4j_store


def unreachable_store() -> Neo4jGraphStore:
    driver = neo4j.GraphDatabase.driver(f"bolt://127.0.0.1:{free_port()}", connection_timeout=1.0,
                                        max_transaction_retry_time=0.0)
    return Neo4jGraphStore(driver, setup_schema=False)


def ev(evidence_id: str, confidence: float = 0.5, **fields) -> Evidence:
    return Evidence(evidence_id=evidence_id, source=FactSource.rule, confidence=confidence, ts=1.0, **fields)


# --- URLs and the registry (no server needed) -------------------------------------------------------


def test_urls_give_the_driver_uri_credentials_and_database():
    assert parse_url("bolt://localhost") == Target("bolt://localhost:7687")
    assert parse_url("neo4j://neo4j:secret@db:7688") == Target("neo4j://db:7688", "neo4j", "secret")
    assert parse_url("neo4j+s://u%40x:p%2Fss%3A@graph.example.com/mneme") == Target(
        "neo4j+s://graph.example.com:7687", "u@x", "p/ss:", "mneme")
    assert parse_url("bolt+s://[::1]:7690/") == Target("bolt+s://[::1]:7690")
    assert "secret" not in repr(parse_url("bolt://neo4j:secret@db"))


@pytest.mark.parametrize("url", ["http://db:7687", "bolt://", "bolt://db:99999", "bolt://db:port",
                                 "neo4j+ssc://db", "bolt://db?database=x", "bolt://db/bad%20name", "bolt://db/a/b"])
def test_bad_urls_are_configuration_errors(url):
    with pytest.raises(ConfigurationError):
        parse_url(url)


def test_the_registry_maps_the_four_schemes_to_the_adapter_and_its_extra():
    for scheme in ("neo4j", "neo4j+s", "bolt", "bolt+s"):
        assert BACKENDS["graph"][scheme] == ("memory.graph.neo4j:Neo4jGraphStore", "neo4j")


# --- errors at the boundary ------------------------------------------------------------------------


def test_an_unreachable_server_is_a_transient_error():
    with unreachable_store() as store, pytest.raises(TransientError):
        store.ping()
    with pytest.raises(TransientError):
        Neo4jGraphStore.from_url(f"bolt://127.0.0.1:{free_port()}", Settings())


def test_bad_credentials_and_a_missing_database_are_configuration_errors(bolt_server):
    with pytest.raises(ConfigurationError, match="refused"):
        Neo4jGraphStore.from_url(f"bolt://{USER}:wrong@127.0.0.1:{bolt_server.port}", Settings())
    with pytest.raises(ConfigurationError, match="not found"):
        Neo4jGraphStore.from_url(f"bolt://{USER}:{bolt_server.password}@127.0.0.1:{bolt_server.port}/nope",
                                 Settings())


@pytest.mark.parametrize("scheme", ["bolt", "neo4j"])
def test_open_backend_builds_the_store_from_a_url(bolt_server, scheme):
    url = bolt_server.url.replace("bolt://", f"{scheme}://", 1)
    store = open_backend("graph", url, Settings())
    try:
        assert isinstance(store, Neo4jGraphStore)
        store.ping()  # a round trip to the server
        store.create_schema()  # idempotent
        assert store.relations("t", "nobody") == []
    finally:
        store.close()


# --- the layout ------------------------------------------------------------------------------------


def test_the_stored_layout(neo4j_store, raw):
    tenant, user = f"t-{uuid.uuid4().hex}", "用户"
    key = RelationKey(tenant=tenant, user_id=user, relation=Relation.likes,
                      concept_id=mneme_ids.concept_id(tenant, "物理"), object="物理")
    change = neo4j_store.merge(key, ev("e1", message_ids=["m1"]), MergeMode.blend)
    [row] = raw("MATCH (u:User)-[r:HOLDS]->(c:Concept) WHERE r.rel_id = $rel_id "
                "RETURN u {.*} AS u, r {.*} AS r, c {.*} AS c", rel_id=change.rel_id)
    assert {k: row["u"][k] for k in ("id", "tenant", "name")} == {
        "id": mneme_ids.user_node_id(tenant, user), "tenant": tenant, "name": user}
    assert {k: row["c"][k] for k in ("id", "tenant", "name")} == {"id": key.concept_id, "tenant": tenant,
                                                                    "name": "物理"}
    assert row["r"]["relation"] == "likes" and row["r"]["evidence_count"] == 1 and "_lock" not in row["r"]
    [evidence] = raw("MATCH (e:Evidence {rel_id: $rel_id}) RETURN e {.*} AS e", rel_id=change.rel_id)
    assert evidence["e"]["evidence_id"] == "e1" and evidence["e"]["message_ids"] == ["m1"]
    assert evidence["e"]["seq"] == 1 and evidence["e"]["action"] == "merge:blend"


def test_a_relations_clock_only_moves_forward_when_a_workers_clock_is_behind(neo4j_store, monkeypatch):
    import memory.graph.neo4j as adapter

    clock = iter([2_000.0, 1_000.0, 1_500.0])
    monkeypatch.setattr(adapter, "time", type("Clock", (), {"time": staticmethod(lambda: next(clock))}))
    tenant = f"t-{uuid.uuid4().hex}"
    key = RelationKey(tenant=tenant, user_id="u", relation=Relation.goal,
                      concept_id=mneme_ids.concept_id(tenant, "清华"), object="清华")
    neo4j_store.merge(key, ev("e1", 0.5), MergeMode.blend)
    [seen] = neo4j_store.relations(tenant, "u", Relation.goal)
    neo4j_store.merge(key, ev("e2", 0.9), MergeMode.blend)  # from a worker whose clock is 1000 s behind
    neo4j_store.scale(seen.rel_id, ev("c1"), 0.5)  # and another one, 500 s behind
    [now] = neo4j_store.relations(tenant, "u", Relation.goal)
    rows = neo4j_store.evidence([seen.rel_id])
    assert [r.evidence_id for r in rows] == ["e1", "e2", "c1"]
    assert seen.updated_at == 2_000.0 < rows[1].applied_at < rows[2].applied_at == now.updated_at
    assert now.base_ts == rows[1].applied_at  # the merge restarted the decay clock, the counter-evidence did not
    assert neo4j_store.materialise(seen.rel_id, 0.2, 0.0, seen.updated_at) is False  # it sees the changes


# --- injection: payloads are data ------------------------------------------------------------------

PAYLOADS = [
    "x'}) DETACH DELETE n //",
    '"]->() MATCH (n) DETACH DELETE n //',
    "`}) MATCH (n) DETACH DELETE n //`",
    "x`]->(m) DETACH DELETE m RETURN `",
    "$param",
    "$rel_id $evidence {source: 'human'}",
    "'; MATCH (n) DETACH DELETE n; //",
    "}) WITH 1 AS x MATCH (n) SET n.pwned = true //",
    "RETURN 1 UNION MATCH (n) DETACH DELETE n",
    "line one\nMATCH (n) DETACH DELETE n\r\n\t// tail",
    "加速度' OR 1=1 -- 中文 \\' \\\\ \u0000 end",
    "/* */ CALL db.labels() //",
]


def _counts(raw) -> dict[str, int]:
    counts = {label: raw(f"MATCH (n:{label}) RETURN count(n) AS n")[0]["n"]
              for label in ("User", "Concept", "Evidence", "Canary")}
    counts["HOLDS"] = raw("MATCH ()-[r:HOLDS]->() RETURN count(r) AS n")[0]["n"]
    counts["pwned"] = raw("MATCH (n) WHERE n.pwned IS NOT NULL RETURN count(n) AS n")[0]["n"]
    return counts


def test_injection_payloads_are_stored_verbatim_and_never_run(neo4j_store, raw):
    run = uuid.uuid4().hex[:8]
    raw("CREATE (:Canary {run: $run, name: 'still here'})", run=run)
    before = _counts(raw)
    for i, payload in enumerate(PAYLOADS):
        tenant, user = f"{payload}-t{run}{i}", f"{payload}-u{run}"
        key = RelationKey(tenant=tenant, user_id=user, relation=Relation.dislikes,
                          concept_id=mneme_ids.concept_id(tenant, payload), object=payload)
        evidence = ev(f"{payload}-e", 0.8, message_ids=[payload, payload + "2"], device_id=payload,
                      session_id=payload, note=payload)
        change = neo4j_store.merge(key, evidence, MergeMode.blend)
        assert (change.tenant, change.user_id, change.object, change.evidence_id) == (
            tenant, user, payload, f"{payload}-e")
        assert neo4j_store.merge(key, evidence, MergeMode.blend) == change  # the payload id is the idempotence key
        assert neo4j_store.scale(change.rel_id, ev(f"{payload}-c", note=payload), 0.5).after == pytest.approx(0.4)
        assert neo4j_store.set_status(change.rel_id, Status.deleted, ev(payload)).action == "delete"
        [rel] = neo4j_store.relations(tenant, user, Relation.dislikes, statuses=list(Status))
        assert (rel.tenant, rel.user_id, rel.object, rel.status) == (tenant, user, payload, Status.deleted)
        rows = neo4j_store.evidence([change.rel_id])
        assert [r.evidence_id for r in rows] == [f"{payload}-e", f"{payload}-c", payload]
        assert (rows[0].message_ids, rows[0].device_id, rows[0].session_id, rows[0].note) == (
            [payload, payload + "2"], payload, payload, payload)
        assert rows[1].note == payload
    after = _counts(raw)
    n = len(PAYLOADS)
    assert after == {**before, "User": before["User"] + n, "Concept": before["Concept"] + n,
                     "Evidence": before["Evidence"] + 3 * n, "HOLDS": before["HOLDS"] + n}
    assert raw("MATCH (c:Canary {run: $run}) RETURN c.name AS name", run=run) == [{"name": "still here"}]
    assert after["pwned"] == 0


@pytest.mark.parametrize("relation", ["likes]->() MATCH (n) DETACH DELETE n //", "LIKES", "likes`",
                                      "$relation", "喜欢", ""])
def test_a_relation_that_is_not_a_name_is_refused_before_any_query(relation):
    """The store points at a closed port: had a query been sent, this would be a TransientError."""
    key = RelationKey.model_construct(tenant="t", user_id="u", relation=relation, concept_id="c_x", object="x")
    with unreachable_store() as store:
        with pytest.raises(InvalidInput, match="not a relation's name"):
            store.relations("t", "u", relation)
        with pytest.raises(InvalidInput, match="not a relation's name"):
            store.merge(key, ev("e1"), MergeMode.blend)
        with pytest.raises(ValueError):
            store.relations("t", "u", statuses=[relation])
    with pytest.raises(ValidationError):
        RelationKey(tenant="t", user_id="u", relation=relation, concept_id="c_x", object="x")
