"""The wire models (``mneme_client.models``) against the library's own classes, and a client that loads no server.

No server, no Redis: the API declares the wire classes and FastAPI reads the library's objects into them,
so each must have the library's fields (and each enum its members), and what the client imports must stay
free of ``memory``."""

import subprocess
import sys
import typing
from enum import StrEnum

import pytest
from mneme_client import models as schemas

from memory import feedback, graph, models, recall
from memory.services import episodic, privacy, semantic
from memory.state import jobs, policy, reviews, working
from workers.api import ROUTERS

ENUMS = {
    schemas.Role: models.Role,
    schemas.EventType: models.EventType,
    schemas.FactSource: models.FactSource,
    schemas.Status: graph.Status,
}
MODELS = {
    schemas.StoredMessage: working.StoredMessage,
    schemas.SessionView: working.SessionView,
    schemas.RolledBack: working.RolledBack,
    schemas.JobStatus: jobs.JobStatus,
    schemas.EventHit: recall.EventHit,
    schemas.FactHit: recall.FactHit,
    schemas.RecallResult: recall.RecallResult,
    schemas.FeedbackResult: feedback.FeedbackResult,
    schemas.Metrics: feedback.Metrics,
    schemas.Belief: semantic.Belief,
    schemas.Claim: reviews.Claim,
    schemas.Review: reviews.Review,
    schemas.Policy: policy.Policy,
    schemas.Receipt: privacy.Receipt,
    schemas.DeletionReceipt: privacy.DeletionReceipt,
    schemas.SessionSummary: working.SessionSummary,
    schemas.ListedEvent: episodic.ListedEvent,
    schemas.BeliefHistory: semantic.BeliefHistory,
    schemas.HistoryStep: semantic.HistoryStep,
}
#: built by the API itself: no library class to match
WIRE_ONLY = {schemas.FullMessage, schemas.MessageAccepted, schemas.MessagesAccepted, schemas.Profile, schemas.Health,
             schemas.ErrorBody, schemas.Read, schemas.Reads, schemas.ConsentChange, schemas.Purposes, schemas.Sessions,
             schemas.Events, schemas.VocabularyOut, schemas.VocabularyRelation, schemas.PageLink}


def _defined_here(kind: type) -> set[type]:
    return {v for v in vars(schemas).values()
            if isinstance(v, type) and issubclass(v, kind) and v.__module__ == schemas.__name__}


def test_every_wire_class_is_checked():
    assert _defined_here(StrEnum) == set(ENUMS)
    assert _defined_here(schemas.Wire) - {schemas.Wire} == set(MODELS) | WIRE_ONLY


@pytest.mark.parametrize("wire", ENUMS, ids=lambda e: e.__name__)
def test_enum_has_the_library_members(wire):
    library = ENUMS[wire]
    assert wire.__name__ == library.__name__  # the schema name in the OpenAPI document
    assert {m.name: m.value for m in wire} == {m.name: m.value for m in library}
    assert wire.__doc__ == library.__doc__  # the schema's description


@pytest.mark.parametrize("wire", MODELS, ids=lambda m: m.__name__)
def test_model_has_the_library_fields(wire):
    library = MODELS[wire]
    assert wire.__name__ == library.__name__
    assert list(wire.model_fields) == list(library.model_fields)
    # types, defaults and descriptions too: the response schema in the OpenAPI document is the same
    assert wire.model_json_schema(mode="serialization") == library.model_json_schema(mode="serialization")


def test_id_rule_is_the_library_rule():
    assert (schemas.ID_PATTERN, schemas.ID_RULE) == (models.ID_PATTERN, models.ID_RULE)


def test_policy_reads_long_term_like_the_library():
    for long_term in (False, True):
        for required in (False, True):
            for purposes in ([], ["tutoring"]):
                fields = {"user_id": "u", "long_term": long_term, "consent_required": required, "purposes": purposes}
                assert schemas.Policy(**fields).keeps_long_term == policy.Policy(**fields).keeps_long_term


def test_every_route_answers_with_a_wire_model():
    declared = [(r.path, r.response_model) for router in ROUTERS for r in router.routes]
    assert len(declared) == 32  # operations (29 paths)
    for path, model in declared:
        if typing.get_origin(model) is dict:  # a plain JSON object ({"deleted": …})
            continue
        inner = getattr(model, "__args__", (model,))[0]  # list[Belief] → Belief
        assert inner in (None, dict) or inner.__module__ == schemas.__name__, (path, model)


def test_the_library_reads_into_the_wire_model():
    stored = working.StoredMessage(message_id="m1", session_id="s1", role=models.Role.user, content="你好 hi",
                                   client_ts=1.0e9, received_at=1.0e9, version=1, seq=0)
    view = working.SessionView(session_id="s1", head=1, version=1, messages=[stored])
    wire = schemas.SessionView.model_validate(view, from_attributes=True)
    assert wire.model_dump() == view.model_dump()
    assert schemas.MessageAccepted(job_id="j", version=1, session_id="s1", message_id="m1", duplicate=False,
                                   in_window=True, client_ts=1.0e9, window=view).window == wire


def test_client_imports_no_server_code():
    probe = ("import sys, mneme_client; print(len(sys.modules)); "
             "assert not any(m.split('.')[0] in ('memory', 'workers', 'tasks', 'numpy', 'redis') "
             "for m in sys.modules), sorted({m.split('.')[0] for m in sys.modules})")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
