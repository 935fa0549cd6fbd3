"""Graph store on Neo4j 5 (official ``neo4j`` driver): ``neo4j://``, ``neo4j+s://``, ``bolt://`` or
``bolt+s://`` ``[user:password@]host[:7687][/database]`` (no credentials = no auth; no database = the
server's default).

Layout::

    (:User {id, tenant, name})
        -[:HOLDS {rel_id, tenant, user_id, relation, concept_id, object, confidence, source, status,
                  created_at, updated_at, base_ts, evidence_count, last_applied_at}]->
    (:Concept {tenant, id, name})
    (:Evidence {rel_id, evidence_id, seq, source, confidence, message_ids, device_id, session_id, ts, note,
                action, before, after, applied_at, purposes})

``User.id`` is ``ids.user_node_id`` and ``User.name`` the user id; ``Concept`` is keyed by (tenant, id).
The relation name is a *property* of one relationship type, ``HOLDS``, never a relationship type of its
own: Cypher cannot take a type as a parameter, so a typed edge would put vocabulary into query text; as a
property it is a parameter like every other value, and every query in this module is a constant string.
(The name is still checked against the name pattern before any query is sent — the vocabulary itself is the
semantic service's — so a malformed one is ``InvalidInput``, not an empty answer.) One type also means one
uniqueness constraint on ``rel_id``, and a user's relations of one kind are a property filter over a few dozen
edges.
Evidence cannot hang off an edge in a property graph, so it is a node keyed by (rel_id, evidence_id)
— the idempotence key — with a uniqueness constraint; ``seq`` numbers a relation's evidence.

Atomicity: each primitive is ONE Cypher statement, run in one managed write transaction
(``execute_write``, retried by the driver on transient errors: safe, because the statement is idempotent
per evidence id). The statement first MERGEs the evidence node: under the uniqueness constraint a
concurrent delivery of the same evidence waits for the first and then finds it (``action IS NULL`` only on
a node this statement created), and a repeat returns the change recorded the first time. It then takes
the relationship's write lock (``SET r._lock = true REMOVE r._lock``, Neo4j's documented way to avoid lost
updates under read-committed isolation) before reading the old confidence, and computes the merge
formula, the human-wins rule and the clamp in Cypher ``CASE`` expressions. A relation's clock
(``last_applied_at``) only moves forward: each write stamps ``max(now, last + 1 µs)`` as its
``applied_at`` and, if it changes the relation, as ``updated_at`` — so evidence ordered by
(applied_at, seq) is the order it was applied in, and ``materialise``'s compare-and-set on
``updated_at`` sees every change in between, even when workers' clocks disagree.

Dialect differences bridged for the Bolt test server (ArcadeDB 26.10.2 with its Bolt plugin, which
announces itself as "Neo4j/5.26.0 compatible"; see ``tests/bolt_server.py``) versus Neo4j 5:
- A failing auto-commit statement on ArcadeDB keeps the writes it made before the error (measured:
  ``CREATE (n) WITH n RETURN 1/0`` leaves ``n``); inside an explicit transaction it rolls back. So every
  write runs in ``execute_write``, never in ``session.run``.
- ArcadeDB evaluates every item of one ``SET`` clause against the values from before the clause
  (``SET r.a = 1, r.b = r.a`` leaves ``b`` at the old ``a``). No ``SET`` here reads a property that an
  earlier item of the same clause writes: computed values come from a preceding ``WITH``, which means the
  same on both servers.
- ArcadeDB is optimistic (MVCC): the lock write does not block, a conflicting commit fails with
  ``Neo.TransientError.Transaction.DeadlockDetected`` ("modified by a concurrent transaction"), which the
  driver retries. Neo4j blocks on the lock instead. Both give one serial order per relation. A concurrent
  MERGE of the same new key (evidence, user, concept) fails on ArcadeDB with ``ConstraintError`` where
  Neo4j waits and matches; such a write is retried here (up to 3 times), and the retry finds the key.
- Schema: ``CREATE CONSTRAINT … IF NOT EXISTS`` (node, composite and relationship uniqueness) and
  ``CREATE INDEX … IF NOT EXISTS`` are accepted and enforced by both; relationship uniqueness needs
  Neo4j ≥ 5.7 (the docker-compose service runs 5.26).
- Values: lists of strings (``message_ids``, empty lists too), ``null`` in a ``+=`` map (the property is
  left unset) and 64-bit floats round-trip exactly on both, so ``materialise`` compares ``updated_at``
  with ``=``. Nothing here needs APOC, ``CALL {}`` subqueries, dynamic labels or a server-side clock
  (timestamps come from the caller, as in the SQLite adapter); ``LIMIT $limit`` works on both.
- Without a database in the URL, ArcadeDB uses its only database and Neo4j the user's home database.

Verified here against ArcadeDB only (no Neo4j can run on this machine); ``tests/test_graph_neo4j.py``
runs the same contract on a real Neo4j when ``MNEME_TEST_NEO4J_URL`` is set (docker-compose ``neo4j``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import neo4j
from neo4j import exceptions as neo4j_errors

from memory import ids
from memory.errors import ConfigurationError, InvalidInput, TransientError
from memory.graph import (
    MAX_CONFIDENCE,
    MIN_CONFIDENCE,
    NEW_WEIGHT,
    OLD_WEIGHT,
    STATUS_ACTIONS,
    Change,
    Evidence,
    EvidenceRow,
    MergeMode,
    RelationKey,
    Status,
    StoredRelation,
    clamp,
)
from memory.models import RELATION_PATTERN
from memory.purposes import ANY
from memory.settings import Settings

SCHEMES = ("neo4j", "neo4j+s", "bolt", "bolt+s")
DEFAULT_PORT = 7687
DATABASE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9.\-]{0,62}$")

_CONSTRAINT_RETRIES = 3
_TICK = 1e-6  # s; a relation's clock steps at least this much per write (≥ 4 ulps at today's epoch)
_TRANSIENT = (neo4j_errors.ServiceUnavailable, neo4j_errors.SessionExpired, neo4j_errors.TransientError,
              neo4j_errors.ConnectionAcquisitionTimeoutError)

SCHEMA = (
    "CREATE CONSTRAINT mneme_user_id IF NOT EXISTS FOR (u:User) REQUIRE u.id IS UNIQUE",
    "CREATE CONSTRAINT mneme_concept_key IF NOT EXISTS FOR (c:Concept) REQUIRE (c.tenant, c.id) IS UNIQUE",
    "CREATE CONSTRAINT mneme_holds_rel_id IF NOT EXISTS FOR ()-[r:HOLDS]-() REQUIRE r.rel_id IS UNIQUE",
    "CREATE CONSTRAINT mneme_evidence_key IF NOT EXISTS FOR (e:Evidence) REQUIRE (e.rel_id, e.evidence_id) "
    "IS UNIQUE",
    "CREATE INDEX mneme_evidence_rel_id IF NOT EXISTS FOR (e:Evidence) ON (e.rel_id)",
)

# The shared tail of every evidence-recording write: bump the relation's evidence counter and clock,
# fill in a fresh evidence node, and return the change (the recorded one on a repeat).
_RECORD = """
SET r.evidence_count = CASE WHEN fresh THEN count + 1 ELSE count END,
    r.last_applied_at = CASE WHEN fresh THEN applied_at ELSE r.last_applied_at END
SET e += CASE WHEN fresh THEN $evidence ELSE {} END
SET e += CASE WHEN fresh THEN {seq: count + 1, action: action, before: before, after: after,
                               applied_at: applied_at} ELSE {} END
RETURN r.tenant AS tenant, r.user_id AS user_id, r.relation AS relation, r.object AS object,
       e.source AS source, e.action AS action, e.before AS before, e.after AS after
"""

_MERGE = """
MERGE (e:Evidence {rel_id: $rel_id, evidence_id: $evidence_id})
WITH e, e.action IS NULL AS fresh
MERGE (u:User {id: $user_node})
  ON CREATE SET u.tenant = $tenant, u.name = $user_id, u.created_at = $now
MERGE (c:Concept {tenant: $tenant, id: $concept_id})
  ON CREATE SET c.name = $object, c.created_at = $now
MERGE (u)-[r:HOLDS {rel_id: $rel_id}]->(c)
  ON CREATE SET r.tenant = $tenant, r.user_id = $user_id, r.relation = $relation, r.concept_id = $concept_id,
                r.object = $object, r.status = coalesce($status, 'active'), r.created_at = $now,
                r.evidence_count = 0
SET r._lock = true
REMOVE r._lock
WITH e, fresh, r, r.confidence AS before, coalesce(r.source, '') AS owner, r.evidence_count AS count,
     coalesce(r.last_applied_at, 0.0) AS last
WITH e, fresh, r, before, count, last,
     fresh AND NOT (owner = 'human' AND $source IN ['rule', 'llm']) AS applies,
     CASE WHEN before IS NULL OR $mode = 'human' THEN $confidence
          WHEN $mode = 'blend' THEN $old_weight * before + $new_weight * $confidence
          WHEN before > $confidence THEN before
          ELSE $confidence END AS raw
WITH e, fresh, r, before, count, applies,
     CASE WHEN NOT applies THEN before WHEN raw < $lo THEN $lo WHEN raw > $hi THEN $hi ELSE raw END AS after,
     CASE WHEN applies THEN $action ELSE 'ignored' END AS action,
     CASE WHEN $now > last THEN $now ELSE last + $tick END AS applied_at
SET r.confidence = after,
    r.source = CASE WHEN NOT applies THEN r.source WHEN $mode = 'human' THEN 'human' ELSE $source END,
    r.status = CASE WHEN NOT applies THEN r.status WHEN $status IS NOT NULL THEN $status
                    WHEN r.status = 'retired' THEN 'active' ELSE r.status END,
    r.updated_at = CASE WHEN applies THEN applied_at ELSE r.updated_at END,
    r.base_ts = CASE WHEN applies THEN applied_at ELSE r.base_ts END
""" + _RECORD

_SCALE = """
MATCH (:User)-[r:HOLDS {rel_id: $rel_id}]->(:Concept)
SET r._lock = true
REMOVE r._lock
WITH r
OPTIONAL MATCH (seen:Evidence {rel_id: $rel_id, evidence_id: $evidence_id})
WITH r, seen
WHERE seen IS NOT NULL OR r.status = 'active'
MERGE (e:Evidence {rel_id: $rel_id, evidence_id: $evidence_id})
WITH e, r, e.action IS NULL AS fresh, r.confidence AS before, r.evidence_count AS count,
     coalesce(r.last_applied_at, 0.0) AS last
WITH e, r, fresh, before, count, last, fresh AND r.source <> 'human' AS applies, before * $factor AS raw
WITH e, r, fresh, before, count, applies,
     CASE WHEN NOT applies THEN before WHEN raw < $lo THEN $lo WHEN raw > $hi THEN $hi ELSE raw END AS after,
     CASE WHEN applies THEN 'counter' ELSE 'ignored' END AS action,
     CASE WHEN $now > last THEN $now ELSE last + $tick END AS applied_at
SET r.confidence = after,
    r.source = CASE WHEN applies THEN 'counter_evidence' ELSE r.source END,
    r.updated_at = CASE WHEN applies THEN applied_at ELSE r.updated_at END
""" + _RECORD

# a change to an existing relation, recorded once per evidence id (``fresh``: not recorded yet)
_ONCE = """
MATCH (:User)-[r:HOLDS {rel_id: $rel_id}]->(:Concept)
SET r._lock = true
REMOVE r._lock
WITH r
MERGE (e:Evidence {rel_id: $rel_id, evidence_id: $evidence_id})
WITH e, r, e.action IS NULL AS fresh, r.confidence AS before, r.evidence_count AS count,
     coalesce(r.last_applied_at, 0.0) AS last
"""

_SET_STATUS = _ONCE + """WITH e, r, fresh, before, before AS after, count, $action AS action,
     CASE WHEN $now > last THEN $now ELSE last + $tick END AS applied_at
SET r.status = CASE WHEN fresh THEN $status ELSE r.status END,
    r.source = CASE WHEN fresh AND $status = 'deleted' THEN 'human' ELSE r.source END,
    r.updated_at = CASE WHEN fresh THEN applied_at ELSE r.updated_at END
""" + _RECORD

_RESCORE = _ONCE + """WITH e, r, fresh, before, count, 'rescore' AS action,
     CASE WHEN fresh THEN $confidence ELSE before END AS after,
     CASE WHEN $now > last THEN $now ELSE last + $tick END AS applied_at
SET r.confidence = after,
    r.base_ts = CASE WHEN fresh THEN $now ELSE r.base_ts END,
    r.updated_at = CASE WHEN fresh THEN applied_at ELSE r.updated_at END
""" + _RECORD

_MATERIALISE = """
MATCH (:User)-[r:HOLDS {rel_id: $rel_id}]->(:Concept)
SET r._lock = true
REMOVE r._lock
WITH r
WHERE r.updated_at = $seen_updated_at AND r.status = 'active'
SET r.confidence = $confidence, r.base_ts = $base_ts
RETURN count(r) AS changed
"""

_ERASE_LIST = """
MATCH (:User {id: $user_node})-[r:HOLDS]->(c:Concept)
RETURN r.rel_id AS rel_id, c.id AS concept
"""
_ERASE_EVIDENCE = "MATCH (e:Evidence) WHERE e.rel_id IN $rel_ids DETACH DELETE e"
_ERASE_RELATIONS = "MATCH (:User {id: $user_node})-[r:HOLDS]->(:Concept) DELETE r"
_ERASE_CONCEPTS = """
MATCH (c:Concept {tenant: $tenant}) WHERE c.id IN $concepts
OPTIONAL MATCH (c)<-[other:HOLDS]-()
WITH c, count(other) AS holders
WHERE holders = 0
DETACH DELETE c
"""
_ERASE_USER = "MATCH (u:User {id: $user_node}) SET u.name = '' REMOVE u.created_at"

_REL_FIELDS = ("rel_id", "tenant", "user_id", "relation", "concept_id", "object", "confidence", "source", "status",
               "created_at", "updated_at", "base_ts")
_REL_RETURN = ", ".join(f"r.{f} AS {f}" for f in _REL_FIELDS)  # constant field names, no user data

_RELATIONS = f"""
MATCH (:User {{id: $user_node}})-[r:HOLDS]->(:Concept)
WHERE r.tenant = $tenant AND r.user_id = $user_id AND r.status IN $statuses
  AND ($relation IS NULL OR r.relation = $relation)
RETURN {_REL_RETURN}
ORDER BY r.confidence DESC, r.updated_at DESC
"""

_ACTIVE_COUNT = "MATCH (:User)-[r:HOLDS]->(:Concept) WHERE r.status = 'active' RETURN count(r) AS n"

_SCAN = f"""
MATCH (:User)-[r:HOLDS]->(:Concept)
WHERE r.status = 'active' AND r.rel_id > $after
RETURN {_REL_RETURN}
ORDER BY r.rel_id
LIMIT $limit
"""

_EV_FIELDS = ("rel_id", "evidence_id", "source", "confidence", "message_ids", "device_id", "session_id", "ts", "note",
              "action", "before", "after", "applied_at")
_EVIDENCE = f"""
MATCH (e:Evidence)
WHERE e.rel_id IN $rel_ids
RETURN {", ".join(f"e.{f} AS {f}" for f in _EV_FIELDS)}, coalesce(e.purposes, ['{ANY}']) AS purposes
ORDER BY e.applied_at, e.seq
"""

_WEIGHTS = {"old_weight": OLD_WEIGHT, "new_weight": NEW_WEIGHT, "lo": MIN_CONFIDENCE, "hi": MAX_CONFIDENCE}


@dataclass(frozen=True)
class Target:
    uri: str  # scheme://host:port, without credentials or database
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    database: str | None = None


def parse_url(url: str) -> Target:
    """``neo4j[+s]://`` or ``bolt[+s]://`` ``[user:password@]host[:port][/database]``; user and password
    are percent-decoded."""
    try:
        parts = urlsplit(url)
        port = parts.port or DEFAULT_PORT
    except ValueError as exc:
        raise ConfigurationError(f"bad port in graph URL: {exc}") from exc
    if parts.scheme not in SCHEMES or not parts.hostname:
        raise ConfigurationError(f"expected {'|'.join(SCHEMES)}://[user:password@]host[:port][/database], "
                                 f"got scheme {parts.scheme!r}")
    if parts.query or parts.fragment:
        raise ConfigurationError("a neo4j graph URL takes no query string: put the database in the path")
    database = unquote(parts.path.strip("/")) or None
    if database is not None and not DATABASE_NAME.match(database):
        raise ConfigurationError(f"bad Neo4j database name {database!r}")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password is not None else None
    return Target(f"{parts.scheme}://{host}:{port}", user, password, database)


@contextmanager
def _boundary(what: str) -> Iterator[None]:
    """Driver errors become Mneme's: unreachable, expired or busy → TransientError (tasks retry);
    refused credentials or a missing database → ConfigurationError."""
    try:
        yield
    except _TRANSIENT as exc:
        raise TransientError(f"neo4j unavailable during {what}: {exc}") from exc
    except (neo4j_errors.AuthError, neo4j_errors.ConfigurationError) as exc:
        raise ConfigurationError(f"neo4j refused {what}: {exc}") from exc
    except neo4j_errors.ClientError as exc:
        if exc.code == "Neo.ClientError.Database.DatabaseNotFound":
            raise ConfigurationError(f"neo4j database not found during {what}: {exc}") from exc
        raise


def _relation(value: str) -> str:
    if not re.fullmatch(RELATION_PATTERN, value):
        raise InvalidInput(f"{value!r} is not a relation's name (a-z, 0-9 and _, starting with a letter)")
    return value


class Neo4jGraphStore:
    def __init__(self, driver: neo4j.Driver, database: str | None = None, setup_schema: bool = True) -> None:
        self._driver, self._database = driver, database
        if setup_schema:
            self.create_schema()

    @classmethod
    def from_url(cls, url: str, settings: Settings) -> Neo4jGraphStore:
        target = parse_url(url)
        auth = (target.user or "", target.password or "") if target.user or target.password else None
        driver = neo4j.GraphDatabase.driver(target.uri, auth=auth, connection_timeout=5.0,
                                            max_transaction_retry_time=10.0, user_agent="mneme")
        try:
            return cls(driver, target.database)
        except BaseException:
            driver.close()
            raise

    def close(self) -> None:
        self._driver.close()

    def __enter__(self) -> Neo4jGraphStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def create_schema(self) -> None:
        """Uniqueness constraints (which also make concurrent MERGEs safe) and indexes; idempotent.
        Schema commands run on their own, outside the data transactions."""
        with _boundary("schema setup"), self._driver.session(database=self._database) as session:
            for statement in SCHEMA:
                session.run(statement).consume()

    # --- the primitives ------------------------------------------------------------------------

    def merge(self, key: RelationKey, evidence: Evidence, mode: MergeMode,
              status: Status | None = None) -> Change:
        mode, relation = MergeMode(mode), _relation(key.relation)
        status = Status.active if mode is MergeMode.human else None if status is None else Status(status)
        rel_id = ids.relation_id(key.tenant, key.user_id, relation, key.concept_id)
        change = self._write("merge", _MERGE, {
            **self._evidence_params(rel_id, evidence), **_WEIGHTS,
            "user_node": ids.user_node_id(key.tenant, key.user_id), "tenant": key.tenant, "user_id": key.user_id,
            "relation": relation, "concept_id": key.concept_id, "object": key.object,
            "confidence": evidence.confidence, "source": evidence.source.value, "mode": mode.value,
            "status": status.value if status else None, "action": f"merge:{mode.value}",
        })
        if change is None:  # cannot happen: the statement MERGEs the relation it returns
            raise RuntimeError(f"neo4j merge of {rel_id} returned no row")
        return change

    def scale(self, rel_id: str, evidence: Evidence, factor: float) -> Change | None:
        return self._write("scale", _SCALE, {**self._evidence_params(rel_id, evidence), **_WEIGHTS,
                                              "factor": float(factor)})

    def set_status(self, rel_id: str, status: Status, evidence: Evidence) -> Change | None:
        status = Status(status)
        return self._write("set_status", _SET_STATUS, {**self._evidence_params(rel_id, evidence),
                                                       "status": status.value, "action": STATUS_ACTIONS[status]})

    def rescore(self, rel_id: str, confidence: float, evidence: Evidence) -> Change | None:
        return self._write("rescore", _RESCORE, {**self._evidence_params(rel_id, evidence),
                                                 "confidence": clamp(confidence)})

    def materialise(self, rel_id: str, confidence: float, base_ts: float, seen_updated_at: float) -> bool:
        params = {"rel_id": rel_id, "confidence": clamp(confidence), "base_ts": float(base_ts),
                  "seen_updated_at": float(seen_updated_at)}
        records = self._run("materialise", _MATERIALISE, params, write=True)
        return bool(records and records[0]["changed"])

    def relations(self, tenant: str, user_id: str, relation: str | None = None,
                  statuses: Sequence[Status] = (Status.active,)) -> list[StoredRelation]:
        params = {"tenant": tenant, "user_id": user_id, "user_node": ids.user_node_id(tenant, user_id),
                  "relation": None if relation is None else _relation(relation),
                  "statuses": [Status(s).value for s in statuses]}
        return [StoredRelation(**r) for r in self._run("relations", _RELATIONS, params)]

    def active_count(self) -> int:
        return int(self._run("active count", _ACTIVE_COUNT, {})[0]["n"])

    def scan(self, after_rel_id: str, limit: int) -> list[StoredRelation]:
        records = self._run("scan", _SCAN, {"after": after_rel_id, "limit": int(limit)})
        return [StoredRelation(**r) for r in records]

    def evidence(self, rel_ids: Sequence[str]) -> list[EvidenceRow]:
        if not rel_ids:
            return []
        return [EvidenceRow(**r) for r in self._run("evidence", _EVIDENCE, {"rel_ids": list(rel_ids)})]

    def erase_user(self, tenant: str, user_id: str) -> int:
        """Several constant statements, each idempotent: a failure part-way is completed by running it
        again (the erasure sweeper does), so no single large transaction is needed."""
        params = {"user_node": ids.user_node_id(tenant, user_id), "tenant": tenant}
        held = self._run("erase", _ERASE_LIST, params)
        rel_ids = [r["rel_id"] for r in held]
        concepts = sorted({r["concept"] for r in held})
        self._run("erase", _ERASE_EVIDENCE, {"rel_ids": rel_ids}, write=True)
        self._run("erase", _ERASE_RELATIONS, params, write=True)
        self._run("erase", _ERASE_CONCEPTS, {**params, "concepts": concepts}, write=True)
        self._run("erase", _ERASE_USER, params, write=True)
        return len(rel_ids)

    def ping(self) -> None:
        self._run("ping", "RETURN 1 AS one", {})

    # --- plumbing ------------------------------------------------------------------------------

    @staticmethod
    def _evidence_params(rel_id: str, ev: Evidence) -> dict[str, Any]:
        return {
            "rel_id": rel_id, "evidence_id": ev.evidence_id, "now": time.time(), "tick": _TICK,
            "evidence": {"source": ev.source.value, "confidence": ev.confidence, "message_ids": list(ev.message_ids),
                         "device_id": ev.device_id, "session_id": ev.session_id, "ts": ev.ts, "note": ev.note,
                         "purposes": sorted(set(ev.purposes))},
        }

    def _write(self, what: str, query: str, params: dict[str, Any]) -> Change | None:
        records = self._run(what, query, params, write=True)
        if not records:
            return None
        row = records[0]
        return Change(rel_id=params["rel_id"], evidence_id=params["evidence_id"], **row)

    def _run(self, what: str, query: str, params: dict[str, Any], write: bool = False) -> list[dict[str, Any]]:
        def work(tx: neo4j.ManagedTransaction) -> list[dict[str, Any]]:
            return tx.run(query, params).data()

        # One bookmark manager for every session of this store: on a cluster a read (possibly from a
        # follower) sees the writes this process made before it.
        bookmarks = self._driver.execute_query_bookmark_manager
        with _boundary(what), self._driver.session(database=self._database, bookmark_manager=bookmarks) as session:
            execute: Callable[..., list[dict[str, Any]]] = session.execute_write if write else session.execute_read
            for _ in range(_CONSTRAINT_RETRIES):
                try:
                    return execute(work)
                except neo4j_errors.ConstraintError:
                    # A concurrent writer created the same new key first (ArcadeDB reports this at commit;
                    # Neo4j waits instead). Once it has committed, the same statement finds the key.
                    if not write:
                        raise
            return execute(work)
