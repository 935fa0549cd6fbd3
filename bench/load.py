"""The stack under load, for the benchmarks that drive a real one (end to end, the API, reads, fairness): the
bench conversations' texts, message bodies, a minimal keep-alive HTTP client (httpx spent ~1 ms of the box's CPU per
request, which the stack it measures would pay for), sending, watching jobs end, CPU seconds per process and the texts
the model embedded; the tenant the benches write as, and a Valkey of its own for those that need Redis alone."""

from __future__ import annotations

import asyncio
import html
import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

from memory.pipeline import EMBED_MAX_CHARS
from memory.state.jobs import Jobs
from memory.text import clean
from workers.local.stack import Stack

DATA = Path(__file__).parent / "data"
TENANT = "default"  # the tenant the benches write as
_T = TypeVar("_T")


def corpus() -> list[tuple[str, str]]:
    """(role, content) of every message of the bench conversations, in order."""
    users = json.loads((DATA / "conversations.json").read_text(encoding="utf-8"))
    return [(m["role"], m["content"]) for u in users for s in u["sessions"] for m in s["messages"]]


def at_agent_length(answer: str, answers: list[str], rng: random.Random) -> str:
    """An assistant answer at a chat model's length: followed by 3 to 10 of ``answers`` (the bench sets'
    answers are a sentence; an agent's run to hundreds of characters)."""
    return " ".join([answer, *rng.sample(answers, rng.randint(3, 10))])


def long_answers(seed: int = 1) -> list[tuple[str, str]]:
    """``corpus`` with each assistant reply ``at_agent_length``, among the corpus's other replies."""
    rng, said = random.Random(seed), corpus()
    replies = [text for role, text in said if role == "assistant"]
    return [(role, at_agent_length(text, replies, rng) if role == "assistant" else text) for role, text in said]


def as_embedded(text: str) -> str:
    """A message's text as the embed stage gives it to the model: cleaned, unescaped, at most
    ``EMBED_MAX_CHARS``."""
    return html.unescape(clean(text))[:EMBED_MAX_CHARS]


def queries() -> list[str]:
    return [q["query"] for q in json.loads((DATA / "queries.json").read_text(encoding="utf-8"))]


def pct(samples: list[float], q: float) -> float:
    """The q-quantile (0..1) of samples, nearest rank, in milliseconds."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered))) - 1))] * 1000


def message_body(i: int, text: str, role: str, users: int, per_session: int, ts: float) -> dict:
    user = i % users
    n = i // users
    return {"user_id": f"u{user}", "session_id": f"u{user}-s{n // per_session}", "message_id": f"m{i}",
            "role": role, "content": text, "client_ts": ts}


async def enqueue_all(port: int, bodies: list[dict], concurrency: int, api_key: str = "") -> list[str]:
    """POST every body to /v1/messages on ``concurrency`` keep-alive connections with the API bench's minimal
    client (httpx spent ~1 ms of the box's CPU per request, which the stack it measures would pay for), as
    ``api_key``'s tenant if given; their job ids."""
    return await send_all(port, "/v1/messages", [json.dumps(b).encode() for b in bodies], concurrency,
                           lambda body: body["job_id"], api_key)


async def send_all(port: int, path: str, bodies: list[bytes], concurrency: int, read: Callable[[Any], _T],
                    api_key: str = "") -> list[_T]:
    """POST every body to ``path`` (202 expected) on ``concurrency`` keep-alive connections; what ``read``
    takes from each answer, in the order sent."""
    answers: list[Any] = [None] * len(bodies)
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(bodies)):
        queue.put_nowait(i)
    host = f"127.0.0.1:{port}"

    async def worker() -> None:
        conn = Conn(*await asyncio.open_connection("127.0.0.1", port), api_key)
        try:
            while not queue.empty():
                i = queue.get_nowait()
                status, body = await conn.post(host, path, bodies[i])
                if status != 202:
                    raise RuntimeError(f"POST {path} answered {status}: {body[:200]!r}")
                answers[i] = read(json.loads(body))
        finally:
            conn.writer.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return answers


def embedded_texts(api_url: str) -> dict[str, float]:
    """``mneme_embedded_texts_total`` by source (model, recent, shared), summed over a stack's processes (its
    ``/metrics``)."""
    lines = httpx.get(f"{api_url}/metrics", timeout=10).text.splitlines()
    return {line.split('"')[1]: float(line.split()[-1]) for line in lines
            if line.startswith("mneme_embedded_texts_total{")}


def steal_seconds() -> float:
    """CPU time the hypervisor gave other guests while this machine's CPUs had work (the kernel's steal, summed
    over the CPUs): what a shared box takes from a measurement, whatever runs in it. 0 where not kept."""
    import psutil

    return float(getattr(psutil.cpu_times(), "steal", 0.0))


def busy_seconds() -> float:
    """CPU time this machine's CPUs spent on work (user, nice, system, interrupts; not idle, waiting for a disk
    or stolen by the host), summed over the CPUs: two readings' difference over the seconds between them is how
    many CPUs were busy, whatever ran on them."""
    import psutil

    t = psutil.cpu_times()
    return float(t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0))


def cpu_seconds(stack: Stack) -> dict[str, float]:
    import psutil

    out = {}
    for name, proc in stack.procs.items():
        try:
            p = psutil.Process(proc.pid)
            total = sum(sum(q.cpu_times()[:2]) for q in [p, *p.children(recursive=True)])
        except psutil.Error:
            continue
        out[name] = total
    return out


def cpu_ms_each(before: dict[str, float], after: dict[str, float], n: int, digits: int = 2) -> dict[str, float]:
    """Each process's CPU between two ``cpu_seconds`` readings, in ms per one of ``n`` (messages, requests)."""
    return {name: round((after.get(name, 0) - seconds) / n * 1000, digits) for name, seconds in before.items()}


def wait_finished(jobs: Jobs, job_ids: list[str], started: float, every: float,
                   look: int = 32) -> dict[str, str | None]:
    """Each job's final state once all are done or failed (or 600 s after ``started``). Watching is not to
    cost the stack it watches (on the same CPUs) more than it must: jobs end about in the order they were
    sent, a stage's batch (32) at a time, so each look asks about the oldest unfinished ``look`` jobs and
    goes on to the next ones only while those are all finished. Asking about every unfinished job each time
    cost this process ~1 ms of CPU per message and Redis a third of its own; the oldest 200 each time still
    1.0–1.2 ms a message of a drain (its POSTs included), the oldest 32 0.4–0.5 (four drains each)."""
    finished: dict[str, str | None] = {}
    left = list(job_ids)
    while left and time.perf_counter() - started < 600:
        unfinished: list[str] = []
        while left and not unfinished:
            chunk, rest = left[:look], left[look:]
            finished |= {j: s for j, s in jobs.states(chunk).items() if s in ("done", "failed")}
            unfinished = [j for j in chunk if j not in finished]
            left = unfinished + rest
        if left:
            time.sleep(every)
    return finished


class Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, api_key: str = "") -> None:
        self.reader, self.writer = reader, writer
        self.auth = b"authorization: Bearer %s\r\n" % api_key.encode() if api_key else b""

    async def post(self, host: str, path: str, body: bytes) -> tuple[int, bytes]:
        self.writer.write(b"POST %s HTTP/1.1\r\nHost: %s\r\ncontent-type: application/json\r\n%s"
                          b"content-length: %d\r\n\r\n%s" % (path.encode(), host.encode(), self.auth, len(body),
                                                                 body))
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        return status, await self.reader.readexactly(length)


def embedded_redis(tmp: Path) -> Stack:
    """A Valkey of its own under ``tmp`` (no workers, no API): for the sections that need Redis alone."""
    stack = Stack(tmp, env={"MNEME_REDIS_URL": ""}, beat=False, flower=False)
    stack.start_redis()
    return stack
