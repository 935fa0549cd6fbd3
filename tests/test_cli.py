"""The ops CLI (``mneme``) against the real stack: status, dead letters, erasure, audit, maintenance, export,
API keys. Commands run through typer's CliRunner with the stack's environment, and as a real process — once
with no ``MNEME_*`` variable at all, finding a stack through the state file it writes."""

import fcntl
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import redis
from mneme_client import MnemeClient
from typer.testing import CliRunner

from memory import ids
from memory.audit import record
from memory.errors import NotFound, TransientError
from memory.models import Role
from memory.state import keys
from memory.state.deadletters import DeadLetters
from tests.accepted import write_job
from tests.polling import wait_until
from tests.stacks import master_key
from workers.celery_app import create_celery
from workers.cli import app
from workers.local.stack import Stack, free_port

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ("redis", "episodic", "graph", "audit", "archive")


@pytest.fixture(scope="module")
def celery(stack):
    c = create_celery(stack.settings)
    yield c
    c.close()


@pytest.fixture(scope="module")
def cli(stack):
    """Run ``mneme ARGS`` in process with the stack's settings; a fresh Settings is read per invocation."""
    runner = CliRunner(env={**{k: v for k, v in stack.env.items() if k.startswith("MNEME_")}, "COLUMNS": "200"})

    def invoke(*args: str):
        return runner.invoke(app, list(args), catch_exceptions=False)

    return invoke


def letter_or_none(client, letter_id):
    try:
        return DeadLetters(client).get(letter_id)
    except NotFound:
        return None


def accepted_job(runtime) -> str:
    job_id = str(uuid.uuid4())
    write_job(runtime, job_id)
    return job_id


@pytest.fixture(scope="module")
def remembered(stack):
    """Two users with long-term memory, so maintenance has users to page through."""
    from mneme_client import MnemeClient

    uid = uuid.uuid4().hex[:10]
    with MnemeClient(stack.api_url) as c:
        jobs = [c.remember(user_id=f"m{uid}-{i}", session_id=f"ms{uid}-{i}", message_id="m1", role="user",
                           content="你好！我喜欢用动画学物理").job_id for i in range(2)]
        assert all(j.state == "done" for j in c.wait(jobs))


# --- status ---------------------------------------------------------------------------------------

def test_status_shows_backends_queues_and_both_workers(cli):
    result = cli("status")
    assert result.exit_code == 0, result.output
    for backend in BACKENDS:
        assert re.search(rf"\b{backend}\W+ok\b", result.stdout), result.stdout
    assert "pipeline@" in result.stdout and "embed@" in result.stdout
    assert "extract" in result.stdout and "pending jobs:" in result.stdout and "dead letters:" in result.stdout


def test_consuming_is_the_workers_healthcheck(cli):
    """What compose's healthcheck runs: 0 for a worker whose consumer beats, 1 (saying why) for one that does not."""
    host = socket.gethostname()
    assert cli("consuming", f"@{host}").exit_code == 0
    result = cli("consuming", f"pipeline@{host}")
    assert result.exit_code == 0 and f"pipeline@{host}: consuming" in result.stdout
    nobody = cli("consuming", "nobody@nowhere")
    assert nobody.exit_code == 1 and "nobody@nowhere: not consuming (never beat)" in nobody.stderr


def test_status_as_a_real_process(stack):
    proc = subprocess.run([sys.executable, "-m", "workers.cli", "status"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**stack.env, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pipeline@" in proc.stdout and "embed@" in proc.stdout
    assert re.search(r"\bredis\W+ok\b", proc.stdout)


# --- finding the stack ----------------------------------------------------------------------------

def mneme(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """``mneme ARGS`` as a user types it: the installed command, in a shell without any MNEME_* variable."""
    shell = {k: v for k, v in os.environ.items() if not k.startswith("MNEME_")}
    return subprocess.run([str(Path(sys.executable).with_name("mneme")), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env={**shell, "COLUMNS": "200", **env})


@pytest.mark.stack  # starts its own stack
def test_mneme_finds_the_stack_make_run_started_without_any_variable(tmp_path_factory):
    """`make run` in a project, then `mneme` in the same directory: the embedded Valkey took a fresh port, and
    the CLI finds it (and the settings the stack runs with) through the state file the stack writes."""
    project = tmp_path_factory.mktemp("project")
    state = project / "var" / "stack.json"
    stack = Stack(project / "var", api_port=free_port(), beat=False, flower=False,
                  env={"MNEME_REDIS_URL": "", "MNEME_TENANT": "acme"})
    try:
        stack.start(wait_embedder=False)
        written = json.loads(state.read_text())
        assert stat.S_IMODE(state.stat().st_mode) == 0o600
        assert (written["api_url"], written["redis_url"]) == (stack.api_url, stack.env["MNEME_REDIS_URL"])
        assert written["pids"] == {name: proc.pid for name, proc in stack.procs.items()}

        found = mneme("status", cwd=project)
        assert found.returncode == 0, found.stdout + found.stderr
        assert re.search(r"\bredis\W+ok\b", found.stdout) and "pipeline@" in found.stdout and "embed@" in found.stdout

        with MnemeClient(stack.api_url) as client:  # the stack's tenant came along with its Redis
            client.remember(user_id="alice", session_id="s1", message_id="m1", role="user", content="我今年17岁")
        exported = mneme("export", "alice", cwd=project)
        assert exported.returncode == 0, exported.stderr
        document = json.loads(exported.stdout)
        assert document["tenant"] == "acme"
        assert [m["content"] for m in document["sessions"][0]["messages"]] == ["我今年17岁"]

        elsewhere = mneme("--data-dir", str(project / "var"), "status", cwd=tmp_path_factory.mktemp("elsewhere"))
        assert elsewhere.returncode == 0, elsewhere.stdout + elsewhere.stderr

        explicit = mneme("status", cwd=project, MNEME_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
        assert explicit.returncode == 1 and not re.search(r"\bredis\W+ok\b", explicit.stdout)  # the variable wins
    finally:
        stack.stop()
    assert not state.exists()  # a clean stop removes it
    stopped = mneme("status", cwd=project)
    assert stopped.returncode == 1
    assert "no running stack found" in stopped.stderr and "make run" in stopped.stderr

    state.write_text(json.dumps(written))  # what a killed stack leaves behind: its processes are gone
    stale = mneme("status", cwd=project)
    assert stale.returncode == 1 and f"ignoring {state}" in stale.stderr and "no longer running" in stale.stderr
    assert str(written["pids"]["redis"]) in stale.stderr


#: Every command that operates a deployment (``audit verify`` checks a file: it needs none).
NEEDS_A_DEPLOYMENT = (["status"], ["dead", "list"], ["dead", "show", "x"], ["keys", "list"],
                      ["keys", "create", "--tenant", "t"], ["export", "u1"], ["erase", "u1", "--yes"],
                      ["run", "decay", "--dry-run"], ["run", "redrive"])


def test_outside_a_stack_each_command_says_where_it_looked_and_creates_nothing(tmp_path):
    """`mneme status` typed in a directory that is no stack's made ./var/master.key and empty stores there once."""
    for args in NEEDS_A_DEPLOYMENT:
        done = mneme(*args, cwd=tmp_path)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert done.stderr.startswith(f"error: no running stack found in {tmp_path / 'var'} "), (args, done.stderr)
        assert "MNEME_DATA_DIR=" in done.stderr and "Nothing was created" in done.stderr
        assert "Traceback" not in done.stderr and "━" not in done.stderr  # no progress bar started either
    elsewhere = mneme("--data-dir", str(tmp_path / "nothing"), "status", cwd=tmp_path)
    assert elsewhere.returncode == 1 and f"no running stack found in {tmp_path / 'nothing'} " in elsewhere.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_redis_url_alone_makes_no_master_key_or_stores(tmp_path):
    """An operator's MNEME_REDIS_URL in a directory that is no deployment's: the CLI would have made a master key
    of its own (opening no user's data, hashing no id as the deployment does) and empty stores."""
    done = mneme("keys", "list", cwd=tmp_path, MNEME_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    assert done.returncode == 1
    assert f"no master key: MNEME_MASTER_KEY is not set and {tmp_path / 'var' / 'master.key'} does not exist" in (
        done.stderr) and "MNEME_DATA_DIR" in done.stderr
    keyed = mneme("keys", "list", cwd=tmp_path, MNEME_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",
                  MNEME_MASTER_KEY=master_key())
    assert keyed.returncode == 1 and f"{tmp_path / 'var'} does not exist" in keyed.stderr
    assert list(tmp_path.iterdir()) == []
    assert mneme("audit", "verify", cwd=tmp_path).returncode == 2  # a file to check, none there: nothing made
    assert list(tmp_path.iterdir()) == []


# --- dead letters ---------------------------------------------------------------------------------

def test_a_poison_task_lands_in_dead_letters_and_replays_into_them_again(runtime, celery, cli):
    job_id = accepted_job(runtime)
    runtime.state.client.hset(keys.job(job_id), "payload", json.dumps({"role": "robot", "content": "秘密 secret"}))
    kwargs = {"job_id": job_id}  # tasks carry ids: the malformed message is the job's
    sent = celery.send_task("memory.extract", kwargs=kwargs)
    letter = wait_until(lambda: letter_or_none(runtime.state.client, sent.id), 30, "the dead letter")
    assert (letter.task, letter.queue, letter.job_id, letter.kwargs) == ("memory.extract", "extract", job_id, kwargs)
    assert (letter.tenant, letter.user_id) == ("default", "u")  # whose it was, for erasure and export
    assert letter.error_type == "InvalidInput" and "role" in letter.error_message
    assert "File " in letter.traceback and "InvalidInput" in letter.traceback.splitlines()[-1]
    assert "robot" not in letter.model_dump_json() and "secret" not in letter.model_dump_json()
    assert len(letter.traceback.splitlines()) <= 20
    job = wait_until(lambda: (j := runtime.state.jobs.get(job_id)).state == "failed" and j, 30, "the job failed")
    assert "extract" in job.error and "validation" in job.error.lower()

    listed = cli("dead", "list", "--json", "--limit", "100000")
    assert listed.exit_code == 0 and sent.id in [json.loads(line)["id"] for line in listed.stdout.splitlines()]
    table = cli("dead", "list")
    assert table.exit_code == 0 and "dead letters" in table.stdout and "memory.extract" in table.stdout
    shown = cli("dead", "show", sent.id)
    assert shown.exit_code == 0 and json.loads(shown.stdout)["kwargs"] == kwargs

    replayed = cli("dead", "replay", sent.id)
    assert replayed.exit_code == 0, replayed.output
    assert letter_or_none(runtime.state.client, sent.id) is None  # removed once sent
    again = wait_until(lambda: next((d for d in DeadLetters(runtime.state.client).list(100_000)
                                     if d.job_id == job_id and d.id != sent.id), None),
                       30, "the replayed task's letter")
    assert again.kwargs == kwargs and again.error_type == "InvalidInput"  # re-sent, failed again, kept again

    assert cli("dead", "drop", again.id).exit_code == 0
    assert letter_or_none(runtime.state.client, again.id) is None
    assert cli("dead", "drop", again.id).exit_code == 1
    missing = cli("dead", "show", again.id)
    assert missing.exit_code == 1 and "no dead letter" in missing.output
    assert cli("dead", "replay").exit_code == 2  # neither an ID nor --all


def test_a_malformed_embed_request_lands_in_dead_letters(runtime, celery):
    job_id = accepted_job(runtime)
    runtime.state.client.hset(keys.job(job_id), "work", json.dumps({"mode": "full", "events": [{"bogus": True}]}))
    sent = celery.send_task("memory.embed", kwargs={"job_id": job_id})
    letter = wait_until(lambda: letter_or_none(runtime.state.client, sent.id), 30, "the dead letter")
    assert (letter.task, letter.queue, letter.job_id) == ("memory.embed", "embed", job_id)
    assert letter.kwargs == {"job_id": job_id} and letter.error_type == "InvalidInput"
    job = wait_until(lambda: (j := runtime.state.jobs.get(job_id)).state == "failed" and j, 30, "the job failed")
    assert "its extraction is malformed" in job.error
    nameless = celery.send_task("memory.embed", kwargs={})
    nameless_letter = wait_until(lambda: letter_or_none(runtime.state.client, nameless.id), 30, "the nameless letter")
    assert nameless_letter.error_message == "an embed request names no job_id"
    for letter_id in (sent.id, nameless.id):
        DeadLetters(runtime.state.client).remove(letter_id)


def test_replay_all_completes_a_job_whose_failure_cause_is_gone(runtime, client, cli, uid):
    """A message whose extraction gave up while a backend was down: once it is back, replay completes it."""
    user, session = f"u{uid}", f"s{uid}"
    job_id = ids.job_id("default", session, "m1")
    runtime.state.working.append(tenant="default", user_id=user, session_id=session, message_id="m1", role=Role.user,
                                 content="我叫小明，我喜欢物理", client_ts=time.time(), job_id=job_id)
    assert runtime.state.dead_letters.push(task_id=f"gave-up-{uid}", task="memory.extract", queue="extract",
                                           kwargs={"job_id": job_id}, retries=8, job_id=job_id,
                                           error=TransientError("graph store unavailable"))
    result = cli("dead", "replay", "--all")
    assert result.exit_code == 0, result.output
    assert "replayed" in result.stdout
    assert letter_or_none(runtime.state.client, f"gave-up-{uid}") is None
    [job] = client.wait([job_id], timeout=60)
    assert job.state == "done"
    assert ("name", "小明") in {(f.relation, f.object) for f in client.recall(user_id=user, query="名字").facts}


def test_push_is_idempotent_per_task_id_and_capped(stack):
    """On a database the stack does not use, so trimming touches no other test's dead letters."""
    url = stack.env["MNEME_REDIS_URL"].rsplit("/", 1)[0] + "/7"
    with redis.Redis.from_url(url, decode_responses=True) as r:
        r.flushdb()
        for i in range(5):
            assert DeadLetters(r).push(task_id=f"t{i}", task="memory.audit", queue="audit",
                                    kwargs={"records": [i]}, error=ValueError(f"bad {i}"), cap=3)
        assert not DeadLetters(r).push(task_id="t4", task="memory.audit", queue="audit", error=ValueError("again"),
                                    cap=3)
        assert DeadLetters(r).size() == 3 and r.hlen(keys.DEAD_LETTERS_BY_ID) == 3
        assert [d.id for d in DeadLetters(r).list(10)] == ["t4", "t3", "t2"]
        assert [d.id for d in DeadLetters(r).list(1, offset=1)] == ["t3"]
        assert DeadLetters(r).get("t4").error_message == "bad 4"  # the first failure is kept
        with pytest.raises(NotFound):
            DeadLetters(r).get("t0")
        assert DeadLetters(r).remove("t3") and not DeadLetters(r).remove("t3")
        assert [d.id for d in DeadLetters(r).list(10)] == ["t4", "t2"]
        sent = []
        DeadLetters(r).replay("t2", lambda task, kwargs: sent.append((task, kwargs)))
        assert sent == [("memory.audit", {"records": [2]})] and DeadLetters(r).size() == 1
        with pytest.raises(RuntimeError):
            DeadLetters(r).replay("t4", lambda task, kwargs: (_ for _ in ()).throw(RuntimeError("broker down")))
        assert DeadLetters(r).get("t4")  # a failed send keeps the dead letter
        r.flushdb()


# --- erasure and audit ----------------------------------------------------------------------------

def test_erase_needs_yes_and_prints_the_receipt(client, runtime, cli, uid):
    user, session = f"u{uid}", f"s{uid}"
    accepted = client.remember(user_id=user, session_id=session, message_id="m1", role="user",
                               content="我今年17岁，我喜欢物理")
    client.wait([accepted.job_id])
    refused = cli("erase", user)
    assert refused.exit_code == 2 and "--yes" in refused.output
    assert len(runtime.state.working.read("default", session).messages) == 1  # nothing happened

    done = cli("erase", user, "--tenant", "default", "--yes")
    assert done.exit_code == 0, done.output
    receipt = json.loads(done.stdout)
    assert receipt["complete"] and not any(receipt["remaining"].values())
    assert receipt["removed"]["messages"] == 1 and receipt["removed"]["episodic_events"] >= 1
    assert user not in done.stdout  # the receipt names the hashed user only
    assert runtime.semantic.profile("default", user) == []


def test_audit_verify_exit_codes(stack, runtime, cli, tmp_path, uid):
    runtime.trail.sink.write([record(runtime.user_hash_key, "default", f"u{uid}", "test.cli", f"cli:{uid}:{i}", "test",
                                "human") for i in range(3)])
    live = Path(stack.settings.audit.removeprefix("file://"))
    copy = tmp_path / "audit.jsonl"
    with live.open("rb") as fh:
        fcntl.flock(fh, fcntl.LOCK_SH)  # writers hold LOCK_EX: the copy has whole records only
        shutil.copyfile(live, copy)
    intact = cli("audit", "verify", str(copy))
    assert intact.exit_code == 0 and intact.stdout.startswith("ok:"), intact.output
    assert cli("audit", "verify").exit_code == 0  # the configured file

    lines = copy.read_text(encoding="utf-8").splitlines(keepends=True)
    edited = json.loads(lines[-2])
    edited["operator_id"] = "mallory"
    lines[-2] = json.dumps(edited, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
    copy.write_text("".join(lines), encoding="utf-8")
    tampered = cli("audit", "verify", str(copy))
    assert tampered.exit_code == 1 and "TAMPERED" in tampered.stdout and f"line {len(lines) - 1}" in tampered.stdout
    assert cli("audit", "verify", str(tmp_path / "missing.jsonl")).exit_code == 2


# --- maintenance ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("task", "fields"), [
    ("noise", {"users", "events", "objects"}), ("compact", {"users", "events"}),
    ("archive", {"users", "events", "objects"}), ("decay", {"scanned", "decayed", "retired"}),
    ("sweep", {"checked", "completed", "verified"}), ("redrive", {"stale", "resent"}),
])
def test_run_dry_run_prints_the_report(cli, remembered, task, fields):
    result = cli("run", task, "--dry-run")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["task"] == task and report["dry_run"] is True and fields <= set(report)
    if task in ("noise", "compact", "archive"):
        assert report["users"] >= 2
    if task == "redrive":
        assert report["resent"] == 0


@pytest.mark.parametrize(("args", "shown"), [
    (["run", "noise", "--dry-run"], r"noise: users .*━.* (\d+)/\1 [\d,.]+ users/s"),
    (["run", "decay", "--dry-run"], r"decay: beliefs .*━.* (\d+)/\1 [\d,.]+ beliefs/s"),
])
def test_long_work_shows_a_progress_bar_with_counts_and_rate(stack, remembered, args, shown):
    env = {k: v for k, v in stack.env.items() if k.startswith("MNEME_")}
    runner = CliRunner(env={**env, "COLUMNS": "160", "TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "0"})
    result = runner.invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0 and re.search(shown, plain(result.stderr)), result.stderr


def test_export_shows_its_progress_store_by_store(stack, client, uid, tmp_path):
    a, _ = remember_two_users(client, uid, bob_message_id="b9")
    env = {k: v for k, v in stack.env.items() if k.startswith("MNEME_")}
    runner = CliRunner(env={**env, "COLUMNS": "160", "TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "0"})
    result = runner.invoke(app, ["export", a, "--out", str(tmp_path / "a.json")], catch_exceptions=False)
    assert result.exit_code == 0 and re.search(rf"export {a}: stores .* (\d+)/\1 ", plain(result.stderr)), result.stderr


def plain(terminal: str) -> str:
    """What a terminal shows of ``terminal``: its colour and cursor codes gone."""
    return re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", terminal)


def test_run_pages_users_with_limit_and_batch_size(cli, remembered):
    result = cli("run", "noise", "--dry-run", "--limit", "3", "--batch-size", "1")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["users"] == 3
    assert cli("run", "shrink").exit_code == 2


# --- export ---------------------------------------------------------------------------------------

def remember_two_users(client, uid, bob_message_id):
    a, b = f"alice{uid}", f"bob{uid}"
    jobs = [client.remember(user_id=a, session_id=f"sa{uid}", message_id="m1", role="user",
                            content="我今年17岁，我喜欢物理").job_id,
            client.remember(user_id=a, session_id=f"sa{uid}", message_id="m2", role="user",
                            content="I love chemistry").job_id,
            client.remember(user_id=b, session_id=f"sb{uid}", message_id=bob_message_id, role="user",
                            content="My secret word is pineapple42 and I love chemistry").job_id]
    assert all(j.state == "done" for j in client.wait(jobs))
    return a, b


def test_export_holds_the_users_data_and_no_one_elses(client, runtime, cli, tmp_path, uid):
    a, b = remember_two_users(client, uid, bob_message_id="b1")
    letters = DeadLetters(runtime.state.client)
    letters.push(task_id=f"export-{a}", task="memory.extract", queue="extract", kwargs={"job_id": f"export-{a}"},
                 job_id=f"export-{a}", error=ValueError("poison"), owner=("default", a))
    legacy = {"tenant": "default", "user_id": b, "session_id": "s", "message_id": "x", "role": "user",
              "content": "a failed message with pineapple42", "client_ts": 1.0}  # kept before tasks carried ids
    letters.push(task_id=f"export-{b}", task="memory.extract", queue="extract",
                 kwargs={"job_id": f"export-{b}", "message": legacy}, error=ValueError("poison"))
    out = tmp_path / "export.json"
    result = cli("export", a, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert out.stat().st_mode & 0o777 == 0o600
    text = out.read_text(encoding="utf-8")
    doc = json.loads(text)
    assert doc["user_id"] == a and doc["policy"]["user_id"] == a
    messages = [m["content"] for s in doc["sessions"] for m in s["messages"]]
    assert messages == ["我今年17岁，我喜欢物理", "I love chemistry"]
    assert {(e["type"], e["text"], tuple(e["message_ids"])) for e in doc["episodic_events"]} == {
        ("age_declaration", "我今年17岁，我喜欢物理", ("m1",)), ("preference", "我今年17岁，我喜欢物理", ("m1",)),
        ("preference", "I love chemistry", ("m2",))}
    assert all(e["readable"] and e["summary"] and e["keywords"] for e in doc["episodic_events"])
    beliefs = {(f["relation"], f["object"]) for f in doc["graph_relations"]}
    assert {("age", "17"), ("likes", "物理"), ("likes", "chemistry")} <= beliefs
    assert all(f["why"] for f in doc["graph_relations"])
    assert [(d["job_id"], d["user_id"]) for d in doc["dead_letters"]] == [(f"export-{a}", a)]
    assert "pineapple42" not in text and b not in text

    printed = cli("export", b, "--tenant", "default")
    assert printed.exit_code == 0
    assert "pineapple42" in printed.stdout and "我今年17岁" not in printed.stdout
    assert json.loads(printed.stdout)["user_id"] == b
    for user in (a, b):
        DeadLetters(runtime.state.client).remove(f"export-{user}")


def test_export_never_holds_another_users_text_sharing_a_message_id(client, cli, uid):
    a, _ = remember_two_users(client, uid, bob_message_id="m1")
    exported = cli("export", a)
    assert exported.exit_code == 0
    assert "pineapple42" not in exported.stdout


# --- API keys -------------------------------------------------------------------------------------

def test_keys_create_list_revoke(cli, uid):
    created = cli("keys", "create", "--tenant", f"t{uid}", "--name", "ci", "--rate-limit", "5")
    assert created.exit_code == 0, created.output
    key_id = re.search(r"key id: (\S+)", created.stdout).group(1)
    assert re.search(rf"secret: mn_{key_id}_\S+", created.stdout)
    listed = cli("keys", "list")
    assert key_id in listed.stdout and f"t{uid}" in listed.stdout and "mn_" not in listed.stdout
    assert cli("keys", "revoke", key_id).exit_code == 0
    assert key_id not in cli("keys", "list").stdout
    assert cli("keys", "revoke", key_id).exit_code == 1
