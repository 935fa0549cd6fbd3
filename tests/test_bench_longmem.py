"""Pytest checks for the LongMem generator: deterministic, valid, and round-trips through JSON.

Run with the suite (tests/), or alone: python -m pytest tests/test_bench_longmem.py
"""

import json

from bench.longmem.generate import generate, main
from bench.longmem.validate import load, validate


def test_generated_data_is_valid():
    users, queries = generate(seed=7)
    assert validate(users, queries) == []


def test_generation_is_deterministic_and_seeded():
    a = generate(seed=7)
    assert json.dumps(a) == json.dumps(generate(seed=7))
    assert json.dumps(a) != json.dumps(generate(seed=8))


def test_written_files_match_the_library_call(tmp_path):
    main(["--out", str(tmp_path), "--seed", "7"])
    assert load(str(tmp_path)) == generate(seed=7)


def test_other_seeds_are_valid_too():
    for seed in (1, 2, 3):
        assert validate(*generate(seed=seed)) == [], seed


def test_validator_catches_shared_devices_and_copied_wording():
    users, queries = generate(seed=7)
    users[1]["sessions"][0]["device_id"] = users[0]["sessions"][0]["device_id"]
    gold_id = queries[0]["gold"][0]
    gold_text = next(m["content"] for s in users[0]["sessions"] for m in s["messages"] if m["message_id"] == gold_id)
    queries[0]["query"] = gold_text
    errors = validate(users, queries)
    assert any("device" in e for e in errors)
    assert any("paraphrase rule" in e for e in errors)
