"""The audit trail: the hash-chained file (concurrent writers, every tamper case, the verify command) and the
Elasticsearch sink against ``tests/es_stub.py`` — a STUB, since no Elasticsearch can run here."""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import multiprocessing
import os
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from es_stub import StubElasticsearch
from typer.testing import CliRunner, Result

from memory.audit import FileAuditLog, VerifyReport, eviction_record, graph_write_record, record, verify
from memory.audit.elasticsearch import MAPPINGS, ElasticsearchAuditSink
from memory.audit.file import GENESIS, chained_line
from memory.episodic import Evicted
from memory.errors import ConfigurationError, InvalidInput, NotFound, TransientError
from memory.graph import Change
from memory.models import EventType, FactSource, Relation
from memory.registry import open_backend
from memory.settings import Settings
from memory.userhash import hashing_key
from tests.polling import wait_until
from workers.cli import app
from workers.local.stack import free_port

KEY = hashing_key(b"k" * 32)


def rec(i: int, **fields: object) -> dict:
    return record(KEY, "default", f"用户{i % 3}", "graph.merge", f"r{i}", "pipeline", "rule", confidence_before=None,
                  confidence_after=0.5 + i / 1000, relation="likes", **fields)


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def chain_of(n: int, path: Path) -> Path:
    FileAuditLog(path).write([rec(i) for i in range(n)])
    return path


# --- the record builders ---------------------------------------------------------------------------

def test_records_carry_the_required_fields_and_hash_the_user():
    change = Change(tenant="t", user_id="u42", rel_id="r1", relation=Relation.likes, object="围棋",
                    source=FactSource.human, evidence_id="e1", action="merge:human", before=0.4, after=1.0)
    r = graph_write_record(KEY, change, operator_id="parent_1")
    assert {"id", "ts", "tenant", "user", "operator_id", "source", "action"} <= set(r)
    assert r["id"] == "r1:e1:merge:human" and r["action"] == "graph.merge:human" and r["source"] == "human"
    assert (r["confidence_before"], r["confidence_after"]) == (0.4, 1.0)
    assert "u42" not in json.dumps(r) and len(r["user"]) == 32
    e = eviction_record(KEY, Evicted(tenant="t", user_id="u42", event_id="ev1", event_type=EventType.statement))
    assert e["id"] == "evict:ev1" and e["operator_id"] == "pipeline" and "u42" not in json.dumps(e)
    with pytest.raises(InvalidInput):
        record(KEY, "t", "u", "a", "id", "op", "src", hash="x")


# --- the hash chain ----------------------------------------------------------------------------------

def test_each_line_is_the_record_plus_prev_and_its_sha256(tmp_path):
    path = chain_of(3, tmp_path / "audit.jsonl")
    prev = GENESIS
    for i, raw in enumerate(lines(path)):
        obj = json.loads(raw)
        digest = obj.pop("hash")
        assert obj["prev"] == prev and obj["id"] == f"r{i}"
        body = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        assert hashlib.sha256(body).hexdigest() == digest
        assert raw == json.dumps({**obj, "hash": digest}, sort_keys=True, separators=(",", ":"),
                                 ensure_ascii=False).encode() + b"\n"
        prev = digest
    report = verify(path)
    assert report == VerifyReport(path=str(path), ok=True, records=3, last_hash=prev)
    FileAuditLog(path).write([rec(3)])  # a second writer picks the chain up from the file's last line
    assert json.loads(lines(path)[-1])["prev"] == prev and verify(path).records == 4


def test_non_ascii_and_line_separators_stay_inside_one_line(tmp_path):
    path = tmp_path / "audit.jsonl"
    FileAuditLog(path).write([rec(0, note="喜欢围棋\u2028second\nthird"), rec(1)])
    assert len(lines(path)) == 2 and "喜欢围棋".encode() in lines(path)[0]
    assert verify(path).ok


BATCHES = 100  # per process; enough that unlocked writers would interleave (measured)


def _append_many(path: str, worker: int, batches: int, start: multiprocessing.synchronize.Barrier) -> None:
    log = FileAuditLog(Path(path))
    start.wait(60)  # all processes begin together, once each has imported everything
    for b in range(batches):
        log.write([{**rec(0), "id": f"w{worker}b{b}k{k}"} for k in range(3)])


def test_concurrent_writers_from_several_processes_keep_one_chain(tmp_path):
    path = tmp_path / "audit.jsonl"
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(4)
    workers = [ctx.Process(target=_append_many, args=(str(path), w, BATCHES, start)) for w in range(4)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(120)
        assert p.exitcode == 0
    report = verify(path)
    assert report.ok and report.records == 4 * BATCHES * 3
    ids = [json.loads(raw)["id"] for raw in lines(path)]
    expected = {f"w{w}b{b}k{k}" for w in range(4) for b in range(BATCHES) for k in range(3)}
    assert len(ids) == len(expected) and set(ids) == expected  # every record, once
    for at in range(0, len(ids), 3):  # one write call's records stay contiguous and in order
        assert ids[at].endswith("k0") and ids[at + 1] == ids[at][:-1] + "1" and ids[at + 2] == ids[at][:-1] + "2"


def _forged(after: bytes, record_id: str) -> bytes:
    """A well-formed chained line that claims to follow ``after``: only the next line can give it away."""
    body = {**rec(99), "id": record_id, "prev": json.loads(after)["hash"]}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(text.encode()).hexdigest()
    return json.dumps({**body, "hash": digest}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode() + b"\n"


def _edit(ls: list[bytes]) -> list[bytes]:
    obj = json.loads(ls[2])
    obj["confidence_after"] = 0.99
    ls[2] = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
    return ls


TAMPERING = {
    # name: (change to the 5 lines, first bad line, words of the reason)
    "edited value": (_edit, 3, "hash mismatch"),
    "reformatted line": (lambda ls: ls[:2] + [ls[2].replace(b",", b", ", 1)] + ls[3:], 3, "hash mismatch"),
    "removed middle record": (lambda ls: ls[:2] + ls[3:], 3, "prev is not the hash of line 2"),
    "removed first record": (lambda ls: ls[1:], 1, "first line does not start the chain"),
    "reordered pair": (lambda ls: ls[:2] + [ls[3], ls[2]] + ls[4:], 3, "removed, inserted or moved"),
    "inserted plain line": (lambda ls: ls[:2] + [json.dumps(rec(7)).encode() + b"\n"] + ls[2:], 3,
                            "not a chained record"),
    "inserted chained line": (lambda ls: ls[:2] + [_forged(ls[1], "forged")] + ls[2:], 4,
                              "prev is not the hash of line 3"),
    "duplicated line": (lambda ls: ls[:3] + [ls[2]] + ls[3:], 4, "prev is not the hash of line 3"),
    "truncated last line": (lambda ls: ls[:4] + [ls[4][:-20]], 5, "partial last line"),
    "last newline missing": (lambda ls: ls[:4] + [ls[4][:-1]], 5, "partial last line"),
    "bad JSON line": (lambda ls: ls[:2] + [b'{"id": "r2", "prev": \n'] + ls[3:], 3, "not a JSON line"),
    "not UTF-8": (lambda ls: ls[:2] + [ls[2].replace(b"rule", b"r\xffle")] + ls[3:], 3, "not a JSON line"),
    "not an object": (lambda ls: ls[:2] + [b"[1, 2]\n"] + ls[3:], 3, "not a JSON object"),
}


@pytest.mark.parametrize("case", TAMPERING)
def test_verify_finds_the_first_tampered_line(tmp_path, case):
    path = chain_of(5, tmp_path / "audit.jsonl")
    change, bad_line, words = TAMPERING[case]
    path.write_bytes(b"".join(change(lines(path))))
    report = verify(path)
    assert not report.ok and report.first_bad_line == bad_line, report
    assert words in report.reason and report.records == bad_line - 1
    assert f"line {bad_line}:" in report.summary() and report.summary().startswith("TAMPERED")


def test_an_empty_or_missing_file(tmp_path):
    (tmp_path / "empty.jsonl").touch()
    assert verify(tmp_path / "empty.jsonl") == VerifyReport(path=str(tmp_path / "empty.jsonl"), ok=True, records=0)
    with pytest.raises(NotFound):
        verify(tmp_path / "nope.jsonl")


def test_a_torn_tail_is_cut_off_by_the_next_writer(tmp_path, caplog):
    path = chain_of(3, tmp_path / "audit.jsonl")
    whole = path.read_bytes()
    with path.open("ab") as fh:  # a writer died halfway through its append
        fh.write(lines(path)[0][:40])
    assert verify(path).first_bad_line == 4
    FileAuditLog(path).write([rec(3)])
    assert path.read_bytes().startswith(whole) and verify(path).ok and verify(path).records == 4
    assert "unfinished write" in caplog.text


def _waiting_for_a_lock_on(path: Path) -> bool:
    """Whether a process waits for a lock on ``path`` (``/proc/locks`` marks waiters ``->``)."""
    inode = f":{path.stat().st_ino} "
    return any("->" in line and inode in line for line in Path("/proc/locks").read_text().splitlines())


def test_verify_of_a_live_file_waits_for_a_writer_mid_append_instead_of_calling_it_broken(tmp_path):
    """``mneme audit verify`` on a running stack: a worker may be halfway through its append."""
    path = chain_of(3, tmp_path / "audit.jsonl")
    line, _ = chained_line(rec(3), json.loads(lines(path)[-1])["hash"])
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    reports: list[VerifyReport] = []
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as FileAuditLog.write holds it
        os.write(fd, line[:40])
        reader = threading.Thread(target=lambda: reports.append(verify(path)))
        reader.start()
        wait_until(lambda: reports or _waiting_for_a_lock_on(path), 30, "verify to read or wait for the writer")
        os.write(fd, line[40:])
        os.fsync(fd)
    finally:
        os.close(fd)  # releases the lock
    reader.join(30)
    assert reports == [VerifyReport(path=str(path), ok=True, records=4, last_hash=json.loads(line)["hash"])]


def test_a_write_after_an_unchained_line_starts_a_new_chain_and_verify_still_tells(tmp_path):
    path = tmp_path / "audit.jsonl"
    path.write_text(json.dumps(rec(0)) + "\n")  # written by an older Mneme, or by hand
    FileAuditLog(path).write([rec(1), rec(2)])
    assert json.loads(lines(path)[1])["prev"] == GENESIS
    report = verify(path)
    assert report.first_bad_line == 1 and "not a chained record" in report.reason


def test_a_record_that_is_not_plain_json_is_refused_and_nothing_is_written(tmp_path):
    path = chain_of(2, tmp_path / "audit.jsonl")
    before = path.read_bytes()
    for bad in ({**rec(5), "confidence_after": float("nan")}, {**rec(6), "tags": {"a"}}, {**rec(7), "prev": "x"}):
        with pytest.raises(InvalidInput):
            FileAuditLog(path).write([rec(4), bad])
    assert path.read_bytes() == before


def test_the_registry_opens_the_file_sink_from_the_settings(tmp_path):
    settings = Settings(data_dir=tmp_path)
    sink = open_backend("audit", settings.audit, settings)
    assert isinstance(sink, FileAuditLog) and sink.path == (tmp_path / "audit.jsonl").resolve()
    sink.ping()
    sink.write([rec(1)])
    assert verify(tmp_path / "audit.jsonl").ok


# --- the verify command ------------------------------------------------------------------------------

def run_cli(*args: str, **env: str) -> Result:
    """``mneme audit ARGS`` in process, with no settings from this environment but ``env``."""
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("MNEME_")}
    return CliRunner(env={**unset, **env}).invoke(app, ["audit", *args])


def test_the_verify_command_exit_codes(tmp_path):
    path = chain_of(4, tmp_path / "audit.jsonl")
    ok = run_cli("verify", str(path))
    assert ok.exit_code == 0 and ok.stdout.startswith("ok:") and "4 records" in ok.stdout
    assert len(ok.stdout.strip().splitlines()) == 1
    assert run_cli("verify", f"file://{path}").exit_code == 0
    assert run_cli("verify", MNEME_DATA_DIR=str(tmp_path)).exit_code == 0  # default: the settings' file

    ls = lines(path)
    path.write_bytes(b"".join(ls[:1] + ls[2:]))
    broken = run_cli("verify", str(path))
    assert broken.exit_code == 1 and broken.stdout.startswith("TAMPERED") and "line 2:" in broken.stdout

    assert run_cli("verify", str(tmp_path / "missing.jsonl")).exit_code == 2
    assert run_cli().exit_code == 2
    assert run_cli("verify", "a", "b").exit_code == 2
    assert run_cli("check", str(path)).exit_code == 2
    not_a_file = run_cli("verify", MNEME_AUDIT_URL="elasticsearch://127.0.0.1:9200/audit")
    assert not_a_file.exit_code == 2 and "pass PATH" in not_a_file.stderr


# --- the Elasticsearch sink, against the stub ---------------------------------------------------------

@pytest.fixture
def es():
    with StubElasticsearch() as stub:
        yield stub


def es_sink(stub: StubElasticsearch, query: str = "?max_retries=2", **settings: str) -> ElasticsearchAuditSink:
    sink = open_backend("audit", f"elasticsearch://127.0.0.1:{stub.port}/mneme-audit{query}",
                        Settings(**settings))
    assert isinstance(sink, ElasticsearchAuditSink)
    return sink


def at(when: str, i: int) -> dict:
    return {**rec(i), "ts": datetime.fromisoformat(when).replace(tzinfo=UTC).timestamp()}


def test_es_template_is_installed_once_with_explicit_mappings(es):
    sink = es_sink(es)
    sink.write([rec(1)])
    sink.write([rec(2)])
    es_sink(es).write([rec(3)])  # another process: finds the template, does not put it again
    assert es.count("PUT", "/_index_template/mneme-audit") == 1
    assert es.count("GET", "/_index_template/mneme-audit") == 2
    template = es.templates["mneme-audit"]
    assert template["index_patterns"] == ["mneme-audit-*"] and template["priority"] > 100
    mappings = template["template"]["mappings"]
    assert mappings == MAPPINGS and mappings["dynamic"] is False
    props = mappings["properties"]
    assert all(props[f] == {"type": "keyword"} for f in ("id", "tenant", "user", "operator_id", "source", "action"))
    assert props["ts"] == {"type": "date", "format": "epoch_second"}
    assert props["confidence_before"]["type"] == props["confidence_after"]["type"] == "float"


def test_es_records_land_in_the_daily_index_of_their_ts_under_their_id(es):
    records = [at("2026-01-02T23:59:59.250", 1), at("2026-01-03T00:00:00.5", 2), at("2026-01-03T08:00:00", 3)]
    es_sink(es).write(records)
    assert set(es.indices) == {"mneme-audit-2026.01.02", "mneme-audit-2026.01.03"}
    assert list(es.indices["mneme-audit-2026.01.02"]) == ["r1"]
    assert es.indices["mneme-audit-2026.01.03"]["r3"] == records[2]
    assert "prev" not in es.docs()["r1"]  # the chain belongs to the file


def test_es_re_sending_records_creates_no_duplicates(es):
    sink = es_sink(es)
    records = [rec(i) for i in range(5)]
    sink.write(records[:3])
    sink.write(records)  # a redelivered task: three are there already (409), two are new
    sink.write([{**records[0], "action": "changed"}])  # create, not index: what is stored stays
    docs = es.docs()
    assert sorted(docs) == [f"r{i}" for i in range(5)] and docs["r0"]["action"] == "graph.merge"


def test_es_large_writes_go_in_chunks(es):
    es_sink(es).write([rec(i) for i in range(1201)])
    assert len(es.docs()) == 1201 and es.count("PUT", "/_bulk") == 3


@pytest.mark.parametrize("status", [429, 503])
def test_es_busy_answers_are_retried_then_succeed(es, status):
    sink = es_sink(es)
    sink.ping()
    es.fail_next(2, status)
    sink.write([rec(1), rec(2)])
    assert sorted(es.docs()) == ["r1", "r2"]
    es.reject_items(2, status)  # 200 for the request, but two items refused: those two are re-sent
    sink.write([rec(3), rec(4), rec(5)])
    assert sorted(es.docs()) == [f"r{i}" for i in range(1, 6)]


def test_es_that_keeps_failing_is_a_transient_error(es):
    sink = es_sink(es)
    sink.write([rec(1)])
    es.fail_next(100, 503)
    before = es.count("PUT", "/_bulk")
    with pytest.raises(TransientError, match="busy or unavailable"):
        sink.write([rec(2)])
    assert es.count("PUT", "/_bulk") - before == 3  # the first try and max_retries=2
    es.fail_next(0)
    es.reject_items(100, 429)
    with pytest.raises(TransientError, match="did not take 1 audit records"):
        sink.write([rec(2)])
    es.reject_items(0)
    sink.write([rec(2)])  # the task's retry
    assert sorted(es.docs()) == ["r1", "r2"]


def test_es_a_record_refused_for_good_is_a_configuration_error_and_the_rest_is_stored(es):
    sink = es_sink(es)
    with pytest.raises(ConfigurationError, match="'r2' with 400: document_parsing_exception"):
        sink.write([rec(1), {**rec(2), "confidence_after": "high"}, rec(3)])
    assert sorted(es.docs()) == ["r1", "r3"]


def test_es_a_record_without_id_or_ts_is_refused_before_anything_is_sent(es):
    for bad in ({**rec(1), "id": ""}, {k: v for k, v in rec(2).items() if k != "ts"}, {**rec(3), "ts": "today"}):
        with pytest.raises(InvalidInput):
            es_sink(es).write([rec(0), bad])
    assert es.requests == []


def test_es_unreachable_is_a_transient_error():
    sink = open_backend("audit", f"elasticsearch://127.0.0.1:{free_port()}/mneme-audit?max_retries=1&timeout=2",
                        Settings())
    with pytest.raises(TransientError, match="unreachable"):
        sink.ping()
    with pytest.raises(TransientError):
        sink.write([rec(1)])


def test_es_a_server_without_the_product_header_is_refused():
    with StubElasticsearch(product_header=False) as stub:
        with pytest.raises(ConfigurationError, match="not Elasticsearch"):
            es_sink(stub).ping()
        with pytest.raises(ConfigurationError, match="not Elasticsearch"):
            es_sink(stub).write([rec(1)])


def test_es_ping_and_the_api_key(es):
    es_sink(es, elasticsearch_api_key="a2V5OnNlY3JldA==").ping()
    assert es.requests[-1]["method"] == "GET" and es.requests[-1]["path"] == "/"
    assert es.requests[-1]["headers"]["authorization"] == "ApiKey a2V5OnNlY3JldA=="
    es_sink(es).write([])  # nothing to do: no request
    assert len(es.requests) == 1
    open_backend("audit", f"elasticsearch://elastic:dev%20pw@127.0.0.1:{es.port}/mneme-audit", Settings()).ping()
    assert es.requests[-1]["headers"]["authorization"] == "Basic " + base64.b64encode(b"elastic:dev pw").decode()


@pytest.mark.parametrize("url", ["elasticsearch://127.0.0.1:9200/Upper", "elasticsearch://127.0.0.1:9200/a?x=1",
                                 "elasticsearch://127.0.0.1:notaport/a", "elasticsearch:///prefix",
                                 "elasticsearch://127.0.0.1/a?max_retries=many"])
def test_es_bad_urls_are_configuration_errors(url):
    with pytest.raises(ConfigurationError):
        open_backend("audit", url, Settings())


def test_es_urls_choose_http_or_https_and_a_default_prefix():
    plain = open_backend("audit", "elasticsearch://es.internal", Settings())
    secure = open_backend("audit", "elasticsearchs://es.internal:9243/audit-prod", Settings())
    assert (plain.where, plain.prefix) == ("http://es.internal:9200", "mneme-audit")
    assert (secure.where, secure.prefix) == ("https://es.internal:9243", "audit-prod")
