"""Cypher injection end to end: payloads in every text field that reaches the graph, sent through the real
pipeline — HTTP API → Valkey → Celery workers (rule extraction, graph merge) → the Neo4j adapter → a real
Bolt server (ArcadeDB from PyPI, ``tests/bolt_server.py``) — and through the API's direct graph writes
(``PUT /v1/users/{id}/beliefs``, review resolution).

What reaches the graph, and from where:
- message ``content`` → the fact object (``Concept.name``, ``HOLDS.object``) by the extraction rules;
- ``user_id`` → ``User.name``, ``HOLDS.user_id``; ``session_id``, ``device_id``, ``message_id`` → ``Evidence``;
- ``PUT …/beliefs``: the path's ``user_id`` and ``object`` (1-100 characters as sent); ``operator_id`` → the
  evidence id and note;
- review resolution: the claims' objects (read back from Redis) and ``operator_id``.

Ids, in bodies and in URL paths alike, must match ``^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$``, so the ids that
get through carry the most hostile text that pattern allows: label syntax (``:User``), property access
(``.id``), relationship dashes and comment markers (``--``), ``@``, and the full 128 characters. A path id
outside the pattern (quotes, braces, backticks, ``$`` parameters, ``?#%``, spaces, Chinese, a trailing
newline, 129 characters) is refused with a 422 naming the parameter, without echoing it, before any store
is touched.

Belief objects are stored cleaned, in the one form every text is stored in (``memory.text.clean_label``):
control and bidi characters removed, spaces folded, ``<`` ``>`` ``&`` HTML-escaped exactly once. Cleaning
touches no quote, brace or backtick, so the Cypher payloads reach the graph whole — as data.

The extraction rules end a claim at ``, . ! ? ;`` and newlines and keep at most 30 characters, so the
message payloads are written to fit in one claim (each table row says what object it must become); the
payloads the rules cut (``db.labels()``, newlines) also go through ``PUT …/beliefs`` whole.

After every step: each payload is a belief object in its stored form (``GET …/profile``); and, looking at
the Bolt server directly with the ``neo4j`` driver, a canary node created first is intact, everything in the
graph before the step (a bystander user's data, earlier steps' users) is unchanged, no ``pwned`` property
or ``Pwned`` label exists, and the node and relationship counts are exactly what the API's profiles account
for.
"""

from __future__ import annotations

import html
import json
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import quote

import httpx
import neo4j
import pytest

from tests.bolt_server import USER, BoltServer
from tests.stacks import running_stack

RUN = uuid.uuid4().hex[:6]
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$"


def hostile_id(tag: str) -> str:
    """As hostile as the id pattern allows: a label, property access, relationship dashes / comments, @."""
    return f"{tag}{RUN}:User.name--DETACH_DELETE@n.id:Canary--x"


def longest_id(tag: str) -> str:
    return (f"{tag}{RUN}" + ":--.@_" * 30)[:128]


# (message content, the (relation, object) facts it must become): the rules read a whole phrase (up to a clause
# boundary, "(" or ":" among them) and make nothing of what is none ("我喜欢`]-(m)…": jieba reads no word there)
MESSAGES: list[tuple[str, list[tuple[str, str]]]] = [
    ("I like x'}) DETACH DELETE n //", [("likes", "x'}) DETACH DELETE n //")]),
    ("我喜欢`]-(m) DETACH DELETE m //", []),
    ("I like $param {source: 'human'}", [("likes", "$param {source")]),
    ("My name is Bobby'--", [("name", "Bobby")]),  # a name is letters
    ("I hate x'}) RETURN 1 UNION MATCH (n)", [("dislikes", "x'}) RETURN 1 UNION MATCH")]),
    ("我最喜欢'}) MATCH (n) SET n:Pwned //", []),
    ("我讨厌 $user_id 和 $tenant", []),
    ("我喜欢加速度' OR 1=1 -- \\' \\\\ end", [("likes", "加速度")]),
    ('I can\'t stand "}) CALL db.labels() //', [("dislikes", '"}) CALL db.labels')]),
    # newlines end a claim: one claim per line, each a payload
    ("I like a'}) MATCH (n) DETACH DELETE n\nI hate b\"}) SET n.pwned = 1 //",
     [("likes", "a'}) MATCH"), ("dislikes", 'b"}) SET n.pwned = 1 //')]),
    ("I want to learn c'}) DETACH DELETE n //\r\nMATCH (n) DETACH DELETE n //",
     [("goal", "learn c'}) DETACH DELETE n //")]),
]

# objects for PUT /v1/users/{user_id}/beliefs: no extraction, stored cleaned (see STORED_AS)
PUT_OBJECTS: list[tuple[str, str]] = [
    ("likes", "x'}) DETACH DELETE n //"),
    ("dislikes", '"}) CALL db.labels() YIELD label RETURN label //'),
    ("likes", "`]->() MATCH (n) DETACH DELETE n //"),
    ("goal", "line one\nMATCH (n) DETACH DELETE n\r\n\t// tail"),
    ("likes", "$param $rel_id $evidence {source: 'human'}"),
    ("dislikes", "'; MATCH (n) DETACH DELETE n; //"),
    ("likes", "}) WITH 1 AS x MATCH (n) SET n.pwned = true //"),
    ("goal", "RETURN 1 UNION MATCH (n) DETACH DELETE n"),
    ("likes", "加速度' OR 1=1 -- 中文 \\' \\\\ \u0000 end"),
    ("dislikes", "/* */ CALL db.labels() //"),
    ("likes", "R&D <b>bold</b>"),
    ("likes", "&amp; &lt;script&gt;"),
    ("learning_style", "\u2028sep\u2029 \u202ertl 🙂 \\u0000"),
    ("dislikes", "<&>" * 33 + "<"),  # 100 characters as sent, the most allowed; 433 once escaped
]

# what cleaning makes of the PUT objects it changes; every other one is stored exactly as sent
STORED_AS: dict[str, str] = {
    "`]->() MATCH (n) DETACH DELETE n //": "`]-&gt;() MATCH (n) DETACH DELETE n //",
    "line one\nMATCH (n) DETACH DELETE n\r\n\t// tail": "line one\nMATCH (n) DETACH DELETE n\n// tail",
    "加速度' OR 1=1 -- 中文 \\' \\\\ \u0000 end": "加速度' OR 1=1 -- 中文 \\' \\\\ end",  # NUL gone, spaces folded
    "R&D <b>bold</b>": "R&amp;D &lt;b&gt;bold&lt;/b&gt;",
    # text that arrives escaped (the LLM stage, a stored claim) is taken as escaped: escaped once, not twice
    # (so a user who means the entities themselves reads back "& <script>")
    "&amp; &lt;script&gt;": "&amp; &lt;script&gt;",
    "\u2028sep\u2029 \u202ertl 🙂 \\u0000": "sep rtl 🙂 \\u0000",  # separators and the override gone
    "<&>" * 33 + "<": "&lt;&amp;&gt;" * 33 + "&lt;",
}


def stored(obj: str) -> str:
    return STORED_AS.get(obj, obj)


# path ids outside the id pattern: refused before any store, whatever route they are sent to
PATH_PAYLOADS = [
    f"u'}}) MATCH (n) DETACH DELETE n RETURN 1 AS x{RUN}",
    f'用户"}}]->() SET n:Pwned $tenant \\ ?#% {RUN}',
    "x'}) DETACH DELETE n ", "`]->() MATCH (n) DETACH DELETE n ", "$rel_id", "' OR 1=1 --", "}) RETURN n -- ?#%",
    "学生小明",  # no body can carry a Chinese id either: a path id no one could have written is refused, not looked up
    f"bystander{RUN}\n",  # the bystander's id and a newline: what a regex "$" lets through
    longest_id("u") + "x",  # one character too long
]
PATH_PAYLOAD_IDS = ["quotes", "zh-quotes", "delete", "arrow", "param", "or-1", "return", "zh", "newline", "129-chars"]


@dataclass
class World:
    api: httpx.Client
    raw: object  # (query, **params) -> list of dicts
    canary: dict
    bystander: str
    before_nodes: Counter = field(default_factory=Counter)
    before_rels: Counter = field(default_factory=Counter)
    bystander_profile: list = field(default_factory=list)
    users: set[str] = field(default_factory=set)  # every user id that may hold beliefs


@pytest.fixture(scope="module")
def bolt_server():
    with BoltServer() as server:
        yield server


@pytest.fixture(scope="module")
def graph_stack(tmp_path_factory, bolt_server):
    """A whole stack of its own whose graph store is the Bolt server."""
    with running_stack(tmp_path_factory, "injection-stack", MNEME_CONSENT_REQUIRED="false",
                       MNEME_GRAPH_URL=bolt_server.url) as s:
        yield s


@pytest.fixture(scope="module")
def world(graph_stack, bolt_server):
    driver = neo4j.GraphDatabase.driver(f"bolt://127.0.0.1:{bolt_server.port}", auth=(USER, bolt_server.password))

    def raw(query, **params):
        return [r.data() for r in driver.execute_query(query, params, database_=bolt_server.database).records]

    canary = {"run": RUN, "name": "still here", "note": "x'}) DETACH DELETE n //"}
    with driver, httpx.Client(base_url=graph_stack.api_url, timeout=30) as api:
        raw("CREATE (:Canary {run: $run, name: $name, note: $note})", **canary)
        w = World(api=api, raw=raw, canary=canary, bystander=f"bystander{RUN}")
        w.users.add(w.bystander)
        jobs = [post(w, w.bystander, f"by-s{RUN}", f"by-m{i}", text, device_id=f"by-d{RUN}")
                for i, text in enumerate(["I like physics", "我讨厌背公式"])]
        wait(w, jobs)
        put = api.put(f"/v1/users/{w.bystander}/beliefs", json={"relation": "goal", "object": "考上清华"})
        assert put.status_code == 200, put.text
        w.bystander_profile = comparable(profile(w, w.bystander))
        assert {(b["relation"], b["object"]) for b in w.bystander_profile} == {
            ("likes", "physics"), ("dislikes", "背公式"), ("goal", "考上清华")}
        w.before_nodes, w.before_rels = snapshot(raw)
        assert w.before_nodes and w.before_rels  # the pipeline really writes to the Bolt server
        check_graph(w)
        yield w


# --- helpers ---------------------------------------------------------------------------------------


def upath(user_id: str) -> str:
    return f"/v1/users/{quote(user_id, safe='')}"


def post(w: World, user_id: str, session_id: str, message_id: str, content: str, device_id: str | None) -> str:
    answer = w.api.post("/v1/messages", json={
        "user_id": user_id, "session_id": session_id, "device_id": device_id, "message_id": message_id,
        "role": "user", "content": content, "client_ts": time.time()})
    assert answer.status_code == 202, answer.text
    w.users.add(user_id)
    return answer.json()["job_id"]


def wait(w: World, job_ids: list[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    pending = set(job_ids)
    while pending:
        for job_id in sorted(pending):
            answer = w.api.get(f"/v1/jobs/{job_id}")
            assert answer.status_code == 200, answer.text
            job = answer.json()
            assert job["state"] != "failed", job
            if job["state"] == "done":
                pending.discard(job_id)
        if pending:
            assert time.monotonic() < deadline, f"jobs not done after {timeout}s: {sorted(pending)}"
            time.sleep(0.2)


def profile(w: World, user_id: str, include_inactive: bool = False) -> list[dict]:
    answer = w.api.get(f"{upath(user_id)}/profile", params={"include_inactive": include_inactive})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["user_id"] == user_id
    return body["beliefs"]


def comparable(beliefs: list[dict]) -> list[dict]:
    """A profile without what moves by itself: decayed confidence and its explanation."""
    return sorted(({k: v for k, v in b.items() if k not in ("confidence", "why")} for b in beliefs),
                  key=lambda b: b["rel_id"])


def _key(labels, props) -> str:
    return json.dumps([sorted(labels), props], sort_keys=True, ensure_ascii=False, default=str)


def snapshot(raw) -> tuple[Counter, Counter]:
    nodes = Counter(_key(r["labels"], r["props"]) for r in raw("MATCH (n) RETURN labels(n) AS labels, "
                                                             "properties(n) AS props"))
    rels = Counter(_key([r["type"]], [r["a"], r["props"], r["b"]]) for r in raw(
        "MATCH (a)-[r]->(b) RETURN type(r) AS type, properties(r) AS props, properties(a) AS a, properties(b) AS b"))
    return nodes, rels


def check_graph(w: World) -> None:
    """The canary and everything from the previous check (the bystander's data, earlier steps' users) are
    intact, nothing was injected, and the graph holds exactly what the API's profiles of the users we
    wrote account for."""
    raw = w.raw
    assert raw("MATCH (c:Canary) RETURN properties(c) AS c") == [{"c": w.canary}]
    nodes, rels = snapshot(raw)
    assert not (w.before_nodes - nodes), f"nodes from before changed or vanished: {w.before_nodes - nodes}"
    assert not (w.before_rels - rels), f"relationships from before changed or vanished: {w.before_rels - rels}"
    assert raw("MATCH (n) WHERE n.pwned IS NOT NULL RETURN count(n) AS n") == [{"n": 0}]
    assert raw("MATCH ()-[r]->() WHERE r.pwned IS NOT NULL RETURN count(r) AS n") == [{"n": 0}]
    labels = {label for r in raw("MATCH (n) RETURN labels(n) AS labels") for label in r["labels"]}
    assert labels <= {"User", "Concept", "Evidence", "Canary"}, labels
    assert {r["type"] for r in raw("MATCH ()-[r]->() RETURN type(r) AS type")} <= {"HOLDS"}

    beliefs = {u: profile(w, u, include_inactive=True) for u in sorted(w.users)}
    assert comparable(profile(w, w.bystander, include_inactive=True)) == w.bystander_profile  # untouched
    holders = {u for u, bs in beliefs.items() if bs}
    rel_ids = {b["rel_id"] for bs in beliefs.values() for b in bs}
    concepts = {b["concept_id"] for bs in beliefs.values() for b in bs}
    users = raw("MATCH (u:User) RETURN u.name AS name")
    assert Counter(r["name"] for r in users) == Counter(holders)  # one node per user, every name verbatim
    holds = raw("MATCH (u:User)-[r:HOLDS]->(c:Concept) RETURN r.rel_id AS rel_id, r.user_id AS user_id, "
                "u.name AS name, r.object AS object, c.id AS concept")
    assert sorted(r["rel_id"] for r in holds) == sorted(rel_ids)
    assert raw("MATCH ()-[r:HOLDS]->() RETURN count(r) AS n") == [{"n": len(rel_ids)}]
    by_rel = {b["rel_id"]: (u, b) for u, bs in beliefs.items() for b in bs}
    for r in holds:
        user, belief = by_rel[r["rel_id"]]
        assert (r["user_id"], r["name"], r["object"], r["concept"]) == (user, user, belief["object"],
                                                                      belief["concept_id"])
    assert sorted(r["id"] for r in raw("MATCH (c:Concept) RETURN c.id AS id")) == sorted(concepts)
    orphans = raw("MATCH (e:Evidence) WHERE NOT e.rel_id IN $rel_ids RETURN count(e) AS n", rel_ids=sorted(rel_ids))
    assert orphans == [{"n": 0}]
    # what is there now must still be there, unchanged, at the next check: no step changes an earlier
    # step's users (or the bystander)
    w.before_nodes, w.before_rels = nodes, rels


def beliefs_by(beliefs: list[dict]) -> dict[tuple[str, str], dict]:
    return {(b["relation"], b["object"]): b for b in beliefs}


# --- the payloads ------------------------------------------------------------------------------------


def test_the_id_payloads_are_what_the_id_pattern_allows():
    import re

    from memory.models import ID_PATTERN as PRODUCT_ID_PATTERN

    assert PRODUCT_ID_PATTERN == ID_PATTERN  # the payloads below are built for this pattern
    for tag in ("u", "s", "d", "m"):
        for made in (hostile_id(tag), longest_id(tag)):
            assert re.fullmatch(ID_PATTERN, made), made
    assert len(longest_id("u")) == 128
    assert not any(re.fullmatch(ID_PATTERN, payload) for payload in PATH_PAYLOADS)
    assert len(PATH_PAYLOAD_IDS) == len(PATH_PAYLOADS)
    assert set(STORED_AS) <= {obj for _, obj in PUT_OBJECTS}


def test_message_content_and_ids_are_stored_verbatim(world):
    cases = []
    for i, (content, facts) in enumerate(MESSAGES):
        make = longest_id if i % 4 == 3 else hostile_id  # every 4th message: 128-character ids
        ids = {"user_id": make(f"u{i}"), "session_id": make(f"s{i}"), "device_id": make(f"d{i}"),
               "message_id": make(f"m{i}")}
        cases.append((ids, facts, post(world, ids["user_id"], ids["session_id"], ids["message_id"], content,
                                       ids["device_id"])))
    wait(world, [job for _, _, job in cases])

    for ids, facts, _ in cases:
        held = beliefs_by(profile(world, ids["user_id"]))
        assert sorted(held) == sorted(facts), (ids["user_id"], sorted(held))
        for fact in facts:
            belief = held[fact]
            assert belief["subject"] == ids["user_id"]
            assert belief["message_ids"] == [ids["message_id"]] and belief["devices"] == [ids["device_id"]]
            [evidence] = world.raw("MATCH (e:Evidence {rel_id: $rel_id}) RETURN e.message_ids AS message_ids, "
                                   "e.device_id AS device_id, e.session_id AS session_id", rel_id=belief["rel_id"])
            assert evidence == {"message_ids": [ids["message_id"]], "device_id": ids["device_id"],
                                "session_id": ids["session_id"]}
    check_graph(world)


@pytest.mark.parametrize("user_id", [hostile_id("put"), longest_id("put")], ids=["pattern-id", "longest-id"])
def test_put_beliefs_stores_payload_objects_cleaned_and_ids_verbatim(world, user_id):
    world.users.add(user_id)
    operator = hostile_id("op")
    for relation, obj in PUT_OBJECTS:
        answer = world.api.put(f"{upath(user_id)}/beliefs",
                               json={"relation": relation, "object": obj, "operator_id": operator})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert (body["relation"], body["object"], body["subject"], body["source"]) == (
            relation, stored(obj), user_id, "human")
    held = beliefs_by(profile(world, user_id))
    assert sorted(held) == sorted((relation, stored(obj)) for relation, obj in PUT_OBJECTS)
    for (_relation, obj), belief in held.items():
        [row] = world.raw("MATCH (u:User)-[r:HOLDS {rel_id: $rel_id}]->(c:Concept) RETURN u.name AS user, "
                          "r.object AS object, c.name AS concept", rel_id=belief["rel_id"])
        assert row["user"] == user_id and row["object"] == obj
        assert row["concept"].lower().split() == obj.lower().split()  # one concept per normalised name
        [evidence] = world.raw("MATCH (e:Evidence {rel_id: $rel_id}) RETURN e.evidence_id AS id, e.note AS note",
                               rel_id=belief["rel_id"])
        assert evidence["id"].startswith(f"human:{operator}:") and evidence["note"] == f"set by {operator}"
    check_graph(world)


def test_review_resolution_keeps_payload_claims_as_stored(world):
    user, operator = hostile_id("rev"), hostile_id("resolver")
    # (the claim, its opposite, the object both become, the relation a human keeps)
    pairs = [("I like x'}) DETACH DELETE n //", "I can't stand x'}) DETACH DELETE n //",
              "x'}) DETACH DELETE n //", "dislikes"),
             ("I like `]-(n) SET n:Pwned $x //", "I can't stand `]-(n) SET n:Pwned $x //", "`]-", "likes"),
             # read back from Redis and written again by the resolution: still escaped once
             ("I like R&D <lab> '})//", "I can't stand R&D <lab> '})//", "R&amp;D &lt;lab&gt; '})//", "likes")]
    session, device = hostile_id("rev-s"), hostile_id("rev-d")
    for round_ in (0, 1):  # the claim, then its opposite: a contradiction goes to review
        wait(world, [post(world, user, session, f"{hostile_id('rev-m')}{round_}{i}", pair[round_], device)
                     for i, pair in enumerate(pairs)])
    reviews = world.api.get(f"{upath(user)}/reviews").json()
    assert len(reviews) == len(pairs), reviews
    payload_keep, echoed = "x'}) DETACH DELETE n //", []
    for review in reviews:
        [obj] = {c["object"] for c in review["claims"]}
        _, _, expected, keep_relation = next(p for p in pairs if p[2] == obj)
        assert sorted(c["relation"] for c in review["claims"]) == ["dislikes", "likes"]
        keep = [c["rel_id"] for c in review["claims"] if c["relation"] == keep_relation]
        # a payload where a rel_id belongs: refused before any graph write, and not echoed back
        refused = world.api.post(f"{upath(user)}/reviews/{review['review_id']}/resolve",
                                 json={"keep": [payload_keep], "operator_id": operator})
        assert refused.status_code in (400, 422) and set(refused.json()) >= {"error", "message"}, refused.text
        if echoes(refused.json(), payload_keep):  # checked once the resolution has run through
            echoed.append(refused.text)
        # a payload review id is not an id: refused; a well-formed one that names no review is not found
        bad_id = world.api.post(f"{upath(user)}/reviews/{quote(chr(39) + '}) DETACH DELETE n', safe='')}/resolve",
                                json={"keep": keep, "operator_id": operator})
        assert_refused(bad_id, "path.review_id", chr(39) + "}) DETACH DELETE n")
        missing = world.api.post(f"{upath(user)}/reviews/{hostile_id('no-review')}/resolve",
                                 json={"keep": keep, "operator_id": operator})
        assert missing.status_code == 404, missing.text
        answer = world.api.post(f"{upath(user)}/reviews/{review['review_id']}/resolve",
                                json={"keep": keep, "operator_id": operator})
        assert answer.status_code == 200, answer.text
        kept = beliefs_by(answer.json())[(keep_relation, expected)]
        assert kept["source"] == "human" and kept["status"] == "active"
    assert world.api.get(f"{upath(user)}/reviews").json() == []
    everything = beliefs_by(profile(world, user, include_inactive=True))
    assert {k: b["status"] for k, b in everything.items()} == {
        (relation, obj): "active" if relation == keep else "deleted"
        for _, _, obj, keep in pairs for relation in ("likes", "dislikes")}
    check_graph(world)
    assert not echoed, f"a refusal repeats the payload sent as a rel_id: {echoed}"


def path_id_routes(w: World, payload: str) -> list[tuple[str, str, dict | None, dict | None, str]]:
    """Every route with an id in its path, the payload in one id's place (well-formed ids, the bystander's
    own where there is one, in the others): (method, url, json body, query, the field the 422 must name)."""
    p, me = quote(payload, safe=""), upath(w.bystander)
    rel_id = w.bystander_profile[0]["rel_id"]
    return [
        ("GET", f"/v1/users/{p}/profile", None, None, "path.user_id"),
        ("PUT", f"/v1/users/{p}/beliefs", {"relation": "likes", "object": "physics"}, None, "path.user_id"),
        ("DELETE", f"/v1/users/{p}/beliefs/{rel_id}", None, None, "path.user_id"),
        ("DELETE", f"{me}/beliefs/{p}", None, None, "path.rel_id"),
        # a real belief of the bystander's, the payload as the operator: had it got through, the belief is gone
        ("DELETE", f"{me}/beliefs/{rel_id}", None, {"operator_id": payload}, "query.operator_id"),
        ("GET", f"/v1/users/{p}/reviews", None, None, "path.user_id"),
        ("POST", f"/v1/users/{p}/reviews/r1/resolve", {"keep": []}, None, "path.user_id"),
        ("POST", f"{me}/reviews/{p}/resolve", {"keep": []}, None, "path.review_id"),
        ("GET", f"/v1/users/{p}/consent", None, None, "path.user_id"),
        ("PUT", f"/v1/users/{p}/consent", {"long_term": True}, None, "path.user_id"),
        ("PUT", f"/v1/users/{p}/child", {"child": True}, None, "path.user_id"),
        ("DELETE", f"/v1/users/{p}", None, None, "path.user_id"),
        ("DELETE", f"/v1/users/{p}/events", None, {"event_type": "small_talk"}, "path.user_id"),
        ("GET", f"/v1/sessions/{p}/messages", None, None, "path.session_id"),
        ("GET", f"/v1/sessions/{p}/messages/m1", None, None, "path.session_id"),
        ("GET", f"/v1/sessions/s1/messages/{p}", None, None, "path.message_id"),
        ("POST", f"/v1/sessions/{p}/rollback", {"undo_last": True}, None, "path.session_id"),
        ("GET", f"/v1/jobs/{p}", None, None, "path.job_id"),
    ]


def echoes(body: object, payload: str) -> bool:
    """Whether any text in an answer holds the payload."""
    if isinstance(body, dict):
        return any(echoes(k, payload) or echoes(v, payload) for k, v in body.items())
    if isinstance(body, list):
        return any(echoes(item, payload) for item in body)
    return isinstance(body, str) and payload.strip() in body


def refusal_problem(answer: httpx.Response, field: str, payload: str) -> str | None:
    """What is wrong with an answer that should be a 422 in the API's error shape, naming the one field at
    fault and not repeating what was sent; None when nothing is."""
    body = answer.json()
    if answer.status_code != 422:
        return f"{answer.status_code}, not 422: {answer.text}"
    if body["error"] != "invalid_request" or [d["field"] for d in body["details"]] != [field]:
        return f"does not name {field} alone: {answer.text}"
    if not body["message"].startswith(f"{field}: must be an id"):
        return f"does not say what an id is: {answer.text}"
    if echoes(body, payload):
        return f"repeats the payload: {answer.text}"
    return None


def assert_refused(answer: httpx.Response, field: str, payload: str) -> None:
    problem = refusal_problem(answer, field, payload)
    assert problem is None, problem


@pytest.mark.parametrize("payload", PATH_PAYLOADS, ids=PATH_PAYLOAD_IDS)
def test_path_ids_outside_the_id_pattern_are_refused_before_any_store(world, payload):
    wrong = {}  # every route is tried, so one failure names all the routes that let the payload through
    for method, url, body, params, field_name in path_id_routes(world, payload):
        answer = world.api.request(method, url, json=body, params=params)
        if problem := refusal_problem(answer, field_name, payload):
            wrong[f"{method} {url}"] = problem
    check_graph(world)  # nothing written, nothing erased: the bystander's beliefs all still there
    assert not wrong, wrong


def test_well_formed_ids_that_name_nothing_find_nothing_and_change_nothing(world):
    nobody = hostile_id("nobody")
    assert profile(world, nobody, include_inactive=True) == []
    assert world.api.get(f"{upath(nobody)}/reviews").json() == []
    gone = world.api.delete(f"{upath(world.bystander)}/beliefs/{hostile_id('no-belief')}",
                            params={"operator_id": hostile_id("op")})
    assert gone.status_code == 404 and gone.json()["error"], gone.text
    check_graph(world)


@pytest.mark.parametrize("payload", [
    "x'}) DETACH DELETE n ", "`]->() MATCH (n) DETACH DELETE n ", "$rel_id", "' OR 1=1 --", "}) RETURN n -- ?#%",
])
def test_payload_recall_queries_find_nothing_and_change_nothing(world, payload):
    recall = world.api.post("/v1/recall", json={"user_id": hostile_id("nobody"), "query": payload})
    assert recall.status_code == 200 and recall.json()["facts"] == [], recall.text
    check_graph(world)


@pytest.mark.parametrize(("content", "expected"), [
    ("I like R&D", "R&amp;D"),
    ("I like `]->() MATCH (n) DETACH DELETE n //", "`]-&gt;"),  # "(" ends the phrase
    # 30 characters, 130 once escaped: the stored form outgrows the 100 allowed as sent
    ("I like " + "<&>" * 10, "&lt;&amp;&gt;" * 10),
], ids=["ampersand", "arrow", "all-special"])
def test_objects_with_html_special_characters_are_stored_escaped_once(world, content, expected):
    tag = uuid.uuid4().hex[:6]
    user = hostile_id("html") + tag
    wait(world, [post(world, user, hostile_id("html-s") + tag, hostile_id("html-m"), content,
                      hostile_id("html-d") + tag)])
    check_graph(world)  # whatever the object became, the graph is intact: this is not an injection
    assert [(b["relation"], b["object"]) for b in profile(world, user)] == [("likes", expected)]
    # escaped once: rendered (or unescaped) it reads exactly as the user wrote it
    assert content.removeprefix("I like ").startswith(html.unescape(expected))
