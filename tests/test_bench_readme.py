"""The README's benchmark table is what bench/readme.py renders from the committed bench.json; a run's
sections are merged into it, and what got worse is found in both directions."""

import json

from bench import readme


def test_the_readme_table_is_rendered_from_bench_json():
    results = json.loads(readme.RESULTS.read_text(encoding="utf-8"))
    text = readme.README.read_text(encoding="utf-8")
    assert readme.rewritten(text, results) == text, (
        "README.md's benchmark table differs from bench/results/bench.json: run `python -m bench.readme` "
        "(do not edit the table by hand)")


def _e2e(msg_per_s: float, cpu_ms: float) -> dict:
    return {"mneme_messages_per_s": msg_per_s, "raw_embedder_sentences_per_s": 500.0, "ratio": msg_per_s / 500,
            "cpu_ms_per_message": cpu_ms}


def _extract(rate: float, short_lines: float) -> dict:
    return {"messages_per_s_one_core": rate, "short_lines_messages_per_s_one_core": short_lines}


def test_worse_figures_are_found_in_both_directions_and_improved_ones_are_not():
    before = {"e2e": _e2e(100, 9.0), "extract": _extract(20_000, 30_000)}
    now = {"e2e": _e2e(80, 10.5), "extract": _extract(25_000, 29_000)}  # short lines: -3%, within the margin
    assert readme.worse_than_before(before, now) == [
        {"figure": "end-to-end enqueue -> done", "before": "100 msg/s", "now": "80 msg/s"},  # higher is better
        {"figure": "CPU per message, all stack processes", "before": "9.0 ms", "now": "10.5 ms"},  # lower is
    ]
    assert readme.worse_than_before(now, before) == [
        {"figure": "rule extraction, one core (bench conversations)", "before": "25,000 msg/s",
         "now": "20,000 msg/s"}]


def test_a_figure_not_recorded_is_never_worse():
    assert readme.worse_than_before({"extract": _extract(20_000, None)}, {"extract": _extract(20_000, 1)}) == []


def test_merging_one_section_keeps_the_others_and_records_what_got_worse():
    previous = {"e2e": _e2e(100, 9.0) | {"measured_at": "2026-11-30"},
                "extract": _extract(20_000, 30_000) | {"measured_at": "2026-11-30"}}
    merged = readme.merge(previous, {"extract": _extract(15_000, 30_000) | {"measured_at": "2026-12-01"}})
    assert merged["e2e"] == previous["e2e"]
    assert merged["extract"]["measured_at"] == "2026-12-01"
    assert merged["extract"]["worse_than_before"] == [
        {"figure": "rule extraction, one core (bench conversations)", "before": "20,000 msg/s",
         "now": "15,000 msg/s"}]
    assert readme.merge({}, {"e2e": _e2e(1, 1)})["e2e"]["worse_than_before"] == []  # nothing to compare with
