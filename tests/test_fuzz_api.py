"""Property-based fuzzing of the whole HTTP API with schemathesis, against the real stack over HTTP.

The schema is the live ``/openapi.json`` of the session's ``stack`` (real API, Valkey and Celery workers).
Every operation — ``DELETE /v1/users/{user_id}`` included — gets schemathesis's examples, coverage and
fuzzing phases, with valid and invalid inputs alike. The assertions are the contract every caller relies
on: no answer is a 5xx (``not_a_server_error``), and every 4xx carries our error body
``{"error": code, "message": text}`` and never repeats the text the user sent.

The fuzzing found 4xx answers that did not (405 for a method a path does not have, 404 for an encoded
``/`` in an id, 400 for a JSON body that is not UTF-8): the API now maps Starlette's ``HTTPException`` to
the error body too, and ``test_starlette_http_errors_carry_the_error_body`` keeps those exact requests.
"""

from __future__ import annotations

import json
import math
import re
import time
from datetime import UTC, datetime

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig

from memory.models import EARLIEST_CLIENT_TS
from memory.text import clean

# Examples per operation in the fuzzing phase; the examples and coverage phases add their own cases on
# top (the coverage phase alone sends every operation ~7 wrong methods and many boundary bodies). With the
# API's 22 operations this runs ~1,400 cases in ~35 s on a 2-core box.
MAX_EXAMPLES = 50
MIN_CASES = 1_000

settings.register_profile(
    "mneme-fuzz",
    max_examples=MAX_EXAMPLES,
    derandomize=True,  # the same cases on every run: a CI failure reproduces
    database=None,  # nothing written to .hypothesis/
    deadline=None,  # each example is an HTTP round trip to a stack whose workers are busy meanwhile
    # generation of strings matching the id pattern / nested bodies is slow and filters a lot; the
    # round trips make every example "slow": none of that is a problem of the test
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    print_blob=True,
)
PROFILE = settings.get_profile("mneme-fuzz")

# what the fuzzing saw, for the summary and the cross-checks of the last tests
CASES: dict[str, int] = {}  # operation label -> cases sent
STATUSES: dict[int, int] = {}
ACCEPTED_JOBS: list[str] = []
SENT_TEXTS: set[str] = set()  # distinctive user text the cases carried, for the log scan



def _client_ts_the_api_accepts(context, body):
    """The schema says ``client_ts`` is any number or date-time; the API (rightly, as the README says)
    refuses one before 2000 or more than a day ahead with a 422. Left alone, nearly every generated message
    is refused for that one field (1 of ~110 was accepted), so the accepted path — working memory, devices,
    the queue, the workers — would go unfuzzed. Move such a timestamp into the present; every other field
    keeps what was generated, and the invalid-input cases stay invalid."""
    if context.operation is None or context.operation.label != "POST /v1/messages" or not isinstance(body, dict):
        return body
    ts = body.get("client_ts")
    if isinstance(ts, int | float) and not isinstance(ts, bool):
        seconds = ts / 1000 if math.isfinite(ts) and ts > 1e11 else ts
        if not (math.isfinite(seconds) and EARLIEST_CLIENT_TS <= seconds <= time.time()):
            return {**body, "client_ts": 1_760_000_000.0 + (abs(ts) % 86_400 if math.isfinite(ts) else 0.0)}
    if isinstance(ts, str):
        try:
            parsed = datetime.fromisoformat(ts)
        except ValueError:
            return body
        if not 2000 < parsed.year < datetime.now(UTC).year:  # 2024 is a leap year: a generated 29 February stays
            return {**body, "client_ts": parsed.replace(year=2024).isoformat()}
    return body


@pytest.fixture(scope="module")
def api_schema(stack):
    # an explicit, empty config: a schemathesis.toml lying around must not change what this test does
    loaded = schemathesis.openapi.from_url(f"{stack.api_url}/openapi.json", config=SchemathesisConfig.from_dict({}),
                                           timeout=10)
    loaded.hook("map_body")(_client_ts_the_api_accepts)
    return loaded


@pytest.fixture(autouse=True)
def _node_id_for_schemathesis(request):
    """schemathesis 4.32.5's lazy loader (``from_fixture``) reads and rewrites ``Node._nodeid``, which pytest
    9.2 no longer has (a node's id lives in ``Node._id``): without this every lazy test fails with
    "AttributeError: 'Function' object has no attribute '_nodeid'". Give it the attribute it expects;
    it only uses it to label reports, and pytest's own node ids are unaffected."""
    if not hasattr(request.node, "_nodeid"):
        request.node._nodeid = request.node.nodeid


schema = schemathesis.pytest.from_fixture("api_schema")


def _echoed_text(body, answer: str) -> str | None:
    """An error answer never repeats the user's text (``content``, ``query``, a belief's ``object``); ids it may."""
    if not isinstance(body, dict):
        return None
    for field in ("content", "query", "object"):
        text = body.get(field)
        if isinstance(text, str) and len(text.strip()) >= 12 and (text in answer or json.dumps(text)[1:-1] in answer):
            return f"it repeats the {field} sent"
    return None


def _distinctive_texts(body) -> list[str]:
    """The user text of a body (``content``, ``query``, a belief's ``object``), as sent and as cleaned (what
    Mneme keeps), where it could not turn up in a log by chance: 8+ characters, 5+ distinct ones, not hex
    digits and dashes only (ids, hashes, timestamps), and text rather than a name: a word break or a character
    beyond ASCII (the fuzzer also sends the API's own paths and names such as ``uvicorn.error`` as text, and log
    lines name paths and loggers)."""
    if not isinstance(body, dict):
        return []
    texts = [body.get(field) for field in ("content", "query", "object")]
    forms = {form for t in texts if isinstance(t, str) for form in (t.strip(), clean(t))}
    return [t for t in forms if len(t) >= 8 and len(set(t)) >= 5 and not set(t.lower()) <= set("0123456789abcdef-:. ")
            and (re.search(r"\s", t.strip()) or not t.isascii())]


def _error_body_problem(response) -> str | None:
    try:
        body = json.loads(response.content)
    except ValueError:
        return "the body is not JSON"
    if not isinstance(body, dict):
        return "the body is not a JSON object"
    for key in ("error", "message"):
        if not isinstance(body.get(key), str) or not body[key]:
            return f"{key!r} is missing or not a non-empty string"
    return None


@schema.parametrize()
@settings(PROFILE)
@pytest.mark.timeout(900)  # one pytest item for every operation's cases
def test_no_server_errors_and_4xx_carry_the_error_body(case):
    CASES[case.operation.label] = CASES.get(case.operation.label, 0) + 1
    SENT_TEXTS.update(_distinctive_texts(case.body))
    response = case.call(timeout=30)
    STATUSES[response.status_code] = STATUSES.get(response.status_code, 0) + 1
    case.validate_response(response, checks=[not_a_server_error])
    if response.status_code == 202 and case.method.upper() == "POST" and case.path == "/v1/messages":
        ACCEPTED_JOBS.append(response.json()["job_id"])
    if 400 <= response.status_code < 500:
        problem = _error_body_problem(response) or _echoed_text(case.body, response.text)
        assert problem is None, (
            f"{response.status_code} without our error body ({problem}): {response.text[:500]!r}\n"
            f"reproduce: {case.as_curl_command()}")


@pytest.mark.stack  # reads what the fuzz run (a stack test) saw
def test_enough_cases_ran():
    """Runs after the fuzz test (file order): the fuzzing must not silently shrink to a handful of cases,
    and must have reached the accepted path of ``POST /v1/messages``."""
    if not CASES:
        pytest.skip("the fuzz test was not run (deselected)")
    total = sum(CASES.values())
    print(f"\nschemathesis: {total} cases over {len(CASES)} operations; statuses {dict(sorted(STATUSES.items()))}; "
          f"{len(ACCEPTED_JOBS)} messages accepted; {len(SENT_TEXTS)} distinctive texts sent; per operation {CASES}")
    assert total >= MIN_CASES, CASES
    assert len(CASES) >= 19, sorted(CASES)  # every operation of the API, DELETE /v1/users/{user_id} too
    # how many of the derandomized cases are accepted depends on what the stack holds from the tests before (a
    # session another user owns is a 409): 16-21 measured; the accepted path must be reached, not skimmed
    assert len(ACCEPTED_JOBS) >= 10, STATUSES


def test_accepted_fuzz_messages_complete_in_the_pipeline(stack):
    """Whatever text the fuzzing got accepted, the workers finish it: no job ends ``failed`` (a worker
    crashing on odd text is a 5xx the HTTP answer cannot show). Jobs of users the fuzzing erased meanwhile
    are dropped by design (state ``dropped``, or 404 once erased with the user), and those of sessions it
    deleted or rolled back are ``retracted``."""
    pending = set(ACCEPTED_JOBS)
    failed: dict[str, dict] = {}
    deadline = time.monotonic() + 120
    with httpx.Client(base_url=stack.api_url, timeout=10) as http:
        while pending and time.monotonic() < deadline:
            for job_id in sorted(pending):
                answer = http.get(f"/v1/jobs/{job_id}")
                if answer.status_code == 404:
                    pending.discard(job_id)
                    continue
                assert answer.status_code == 200, answer.text
                status = answer.json()
                if status["state"] in ("done", "failed", "dropped", "retracted"):
                    pending.discard(job_id)
                    if status["state"] == "failed":
                        failed[job_id] = status
            if pending:
                time.sleep(0.5)
    assert not failed, failed
    assert not pending, f"{len(pending)} of {len(ACCEPTED_JOBS)} jobs not done after 120 s"


def test_no_log_holds_text_the_fuzzing_sent(stack):
    """After the fuzz run and its pipeline work: no log line of any process (API, workers, beat) holds message
    text, a query or a belief object that a case sent, raw or JSON-escaped."""
    if not CASES:
        pytest.skip("the fuzz test was not run (deselected)")
    assert len(SENT_TEXTS) >= 5, len(SENT_TEXTS)  # something to look for
    logs = "".join(p.read_text("utf-8", errors="replace") for p in stack.logs.glob("*.log"))
    leaked = [t for t in SENT_TEXTS if t in logs or json.dumps(t, ensure_ascii=False)[1:-1] in logs]
    assert not leaked, f"{len(leaked)} of {len(SENT_TEXTS)} texts the fuzzing sent are in the logs: {leaked[:5]!r}"


# --- routing and parsing errors, found by the fuzzing, answer in our shape too -----------------------


@pytest.mark.parametrize(("method", "path", "content", "status"), [
    ("TRACE", "/v1/messages", None, 405),
    ("DELETE", "/healthz", None, 405),
    ("GET", "/v1/sessions/a%2Fb/messages", None, 404),
    ("POST", "/v1/recall", b"\xbf", 400),
], ids=["trace-messages", "delete-healthz", "slash-in-session-id", "non-utf8-json-body"])
def test_starlette_http_errors_carry_the_error_body(stack, method, path, content, status):
    answer = httpx.request(method, stack.api_url + path, content=content, timeout=10,
                           headers={"content-type": "application/json"} if content is not None else None)
    if answer.status_code != status:  # not an AssertionError: under raises= a wrong status is a plain failure
        pytest.fail(f"expected {status}, got {answer.status_code}: {answer.text}")
    assert _error_body_problem(answer) is None, answer.text
