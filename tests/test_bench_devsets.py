"""Pytest checks for the dev-set adapters (bench/devsets.py) and the runner's helpers (bench/recall_dev.py).

Each set's data is made up here, in tmp_path, in the set's file layout, and read by that set's own load.py
(copied from MNEME_DEV_DATA: the loaders are code, no data; without them these tests skip, saying so).

Run with the suite (tests/), or alone: python -m pytest tests/test_bench_devsets.py
"""

import json
import shutil

import pytest

from bench.devsets import DAY, dev_data_root, load_sets
from bench.recall_dev import before_only, fused, paired_bootstrap
from bench.recall_long import messages

NOW = 1_800_000_000.0


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data, ensure_ascii=False), encoding="utf-8")


def trajectory(tid, day, facts, question, gold, asked):
    return {"tid": tid,
            "message_list": [{"mid": i, "message": text, "time": f"2024年04月{day:02d}日 周一 {8 + i:02d}:00",
                              "place": "某地"} for i, text in enumerate(facts)],
            "question_list": [{"qid": 0, "question": question, "answer": "x", "target_step_id": gold,
                               "choices": {}, "ground_truth": "A", "time": asked}]}


def memdaily(root):
    folder = root / "memdaily" / "messages_and_QAs"
    write(folder / "01_simple_hybrid.json", [
        trajectory(0, 1, ["我的表弟叫小明。", "小明喜欢打篮球。"], "我表弟喜欢什么？", [1],
                   "2024年04月03日 周三 10:00"),
        trajectory(1, 2, ["我的同事叫小红。"], "我同事叫什么？", [0], "2024年04月05日 周五 09:30")])
    write(folder / "06_noisy_roles.json", [trajectory(0, 1, ["我的邻居养了一只猫。"], "天气不错，我邻居养了什么？",
                                                      [0], "2024年04月02日 周二 12:00")])
    write(folder / "01_simple_roles.json", [trajectory(0, 1, ["我买了一把伞。"], "我买了什么？", [0],
                                                       "2024年04月02日 周二 12:00")])  # not a default file


def realmem(root):
    remembered = {"index": 0, "type": "Static", "content": "likes green tea", "source_turn": 1,
                  "source_content_snapshot": "I like green tea.", "source_role_snapshot": "User", "session_uuid": "s1"}
    lost = {**remembered, "content": "owns a bike", "source_turn": 0}  # the loader cannot place it
    sessions = [
        {"session_identifier": "Tea_1:S1_01", "session_uuid": "s1", "current_time": "2025-12-15 (Monday)",
         "dialogue_turns": [{"speaker": "User", "content": "I like green tea.", "is_query": False},
                            {"speaker": "Assistant", "content": "Noted.", "is_query": False}],
         "extracted_memory": [remembered, lost]},
        {"session_identifier": "Tea_1:S1_02", "session_uuid": "s2", "current_time": "2025-12-20 (Saturday)",
         "dialogue_turns": [
             {"speaker": "User", "content": "What should I drink?", "is_query": True, "query_id": "q1",
              "category_name": "Implicit Preference", "session_type": "single_session", "topic": "Tea"},
             {"speaker": "Assistant", "content": "Green tea.", "memory_used": [{"session_uuid": "s1",
                                                                             "content": "likes green tea"}],
              "memory_session_uuids": ["s1"]},
             {"speaker": "User", "content": "Which bike should I ride?", "is_query": True, "query_id": "q2",
              "category_name": "Dynamic Updating", "session_type": "single_session", "topic": "Tea"},
             {"speaker": "Assistant", "content": "Yours.", "memory_used": [{"session_uuid": "s1",
                                                                         "content": "owns a bike"}],
              "memory_session_uuids": ["s1"]},
             {"speaker": "User", "content": "I now prefer black tea.", "is_query": False}],
         "extracted_memory": []}]
    write(root / "realmem" / "dataset" / "Ann_Lee_dialogues_256k.json",
          {"_metadata": {"person_name": "Ann_Lee", "total_sessions": 2, "total_tokens": 0}, "dialogues": sessions})


def prefeval(root):
    folder = root / "prefeval" / "benchmark_dataset"
    items = [("I avoid spicy food.", "Where should I eat tonight?"), ("I hate flying.", "Plan me a trip.")]
    write(folder / "explicit_preference" / "travel.json",
          [{"preference": p, "question": q, "explanation": ""} for p, q in items])
    write(folder / "implicit_preference" / "choice-based" / "travel.json",
          [{"preference": p, "question": q, "conversation": {"query": "Pick one?", "assistant_options": "A or B",
                                                             "user_selection": "B", "assistant_acknowledgment": "OK"}}
           for p, q in items])
    write(folder / "implicit_preference" / "persona-driven" / "travel.json",
          [{"preference": p, "question": q, "persona": "", "conversation": {
              "0": {"user": "Hi there.", "assistant": "Hello."}, "1": {"user": p, "assistant": "I see."}}}
           for p, q in items])


def vehiclemembench(root):
    folder = root / "vehiclemembench" / "benchmark"
    write(folder / "history" / "history_1.txt", "[2025-01-03 08:39] Ann Lee: Seat heating on, please.\n"
                                                "[2025-01-03 08:39] Bo Chen: Sure.\n"
                                                "[2025-02-10 18:05] Bo Chen: Music off.\n")
    write(folder / "qa_data" / "qa_1.json", {"related_to_vehicle_preference": [
        {"gold_memory": "[January 3, 2025] At 8:39 AM, Ann asked for seat heating.",
         "reasoning_type": "state_shift", "query": "Ann gets in. Make it cosy.", "new_answer": []},
        {"gold_memory": "[March 1, 2025] At 9:00 AM, Bo said something.",  # no line at that minute
         "reasoning_type": "preference_conflict", "query": "Bo gets in.", "new_answer": []}]})


@pytest.fixture
def root(tmp_path):
    """A dev-data folder with a made-up item or two of each set, read by the sets' own load.py."""
    shared = dev_data_root()
    if not all((shared / name / "load.py").exists() for name in ("memdaily", "realmem", "prefeval", "vehiclemembench")):
        pytest.skip(f"the sets' load.py are not under {shared} (MNEME_DEV_DATA): nothing to read the made-up data")
    for make in (memdaily, realmem, prefeval, vehiclemembench):
        make(tmp_path)
        name = make.__name__
        shutil.copy(shared / name / "load.py", tmp_path / name / "load.py")
    return tmp_path


def one(root, name):
    return next(load_sets(root, [name], NOW))


def test_memdaily_pools_a_file_under_one_user(root):
    ds = one(root, "memdaily")
    assert [u["user_id"] for u in ds.users] == ["memdaily.01_simple_hybrid", "memdaily.06_noisy_roles"]
    pooled = [m["message_id"] for m in messages(ds.users[0])]
    assert pooled == ["01_simple_hybrid.0.m0", "01_simple_hybrid.0.m1", "01_simple_hybrid.1.m0"]
    assert {m["lang"] for m in messages(ds.users[0])} == {"zh"}
    by_id = {q["query_id"]: q for q in ds.queries}
    assert by_id["01_simple_hybrid.0.q0"]["gold"] == ["01_simple_hybrid.0.m1"]
    assert by_id["01_simple_hybrid.0.q0"]["category"] == "simple"
    assert by_id["06_noisy_roles.0.q0"]["shape"] == "in small talk"
    assert by_id["01_simple_hybrid.1.q0"]["shape"] == "plain"


def test_timelines_shift_so_the_latest_query_is_a_day_before_now(root):
    ds = one(root, "memdaily")
    queries = {q["query_id"]: q for q in ds.queries}
    latest = queries["01_simple_hybrid.1.q0"]  # asked 2024-04-05 09:30: the file's latest
    assert latest["now"] == NOW - DAY
    first = messages(ds.users[0])[0]  # said 2024-04-01 08:00
    assert latest["now"] - first["client_ts"] == 4 * DAY + 90 * 60
    assert queries["01_simple_hybrid.0.q0"]["now"] == NOW - DAY - (2 * DAY - 30 * 60)
    assert queries["06_noisy_roles.0.q0"]["now"] == NOW - DAY  # each user its own shift


def test_realmem_keeps_complete_gold_and_counts_only_the_turns_before_the_query(root):
    ds = one(root, "realmem")
    assert [q["query_id"] for q in ds.queries] == ["Ann_Lee.q1"]  # q2's gold could not be placed
    q = ds.queries[0]
    assert (q["gold"], q["before"], q["category"], q["gold_position"]) == (["s1:0"], "s2:0", "Implicit Preference",
                                                                           "first")
    assert [m["role"] for m in messages(ds.users[0])] == ["user", "assistant", "user", "assistant", "user",
                                                          "assistant", "user"]
    end = messages(ds.users[0])[-1]["client_ts"]
    assert end == NOW - DAY  # the history goes on after its last query: its end is the anchor
    ranked = {"Ann_Lee.q1": ["s2:4", "s2:0", "s1:0", "s2:1", "s1:1"]}
    assert before_only(ranked, ds, k=10) == {"Ann_Lee.q1": ["s1:0", "s1:1"]}
    assert before_only(ranked, ds, k=1) == {"Ann_Lee.q1": ["s1:0"]}


def test_prefeval_pools_each_form_and_counts_any_turn_of_the_session(root):
    ds = one(root, "prefeval")
    assert ds.metric == "hit"
    assert [u["user_id"] for u in ds.users] == ["prefeval.explicit", "prefeval.choice", "prefeval.persona"]
    gold = {q["query_id"]: q["gold"] for q in ds.queries}
    assert gold["explicit.travel.0"] == ["explicit.travel.0.t0"]
    assert gold["choice.travel.1"] == [f"choice.travel.1.t{k}" for k in range(4)]
    assert gold["persona.travel.0"] == [f"persona.travel.0.t{k}" for k in range(4)]
    assert all(q["any_gold"] and q["category"] == q["query_id"].split(".")[0] for q in ds.queries)
    for u in ds.users:
        stamps = [m["client_ts"] for m in messages(u)]
        assert stamps == sorted(stamps) and max(stamps) < NOW - DAY


def test_vehiclemembench_one_line_a_message_with_its_speaker(root):
    ds = one(root, "vehiclemembench")
    msgs = messages(ds.users[0])
    assert [(m["message_id"], m["role"]) for m in msgs] == [("h1.L1", "user"), ("h1.L2", "user"), ("h1.L3", "user")]
    assert msgs[0]["content"].startswith("Ann Lee: ") and msgs[1]["content"].startswith("Bo Chen: ")
    assert msgs[1]["client_ts"] > msgs[0]["client_ts"]  # the same minute, in log order
    assert [(q["query_id"], q["gold"], q["category"]) for q in ds.queries] == [("h1.q0", ["h1.L1", "h1.L2"],
                                                                                 "state_shift")]
    assert ds.notes == {"queries dropped: no gold line placed": 1}


def test_an_absent_set_is_skipped_with_one_line(tmp_path, capsys):
    assert list(load_sets(tmp_path, ["memdaily", "realmem"], NOW)) == []
    assert capsys.readouterr().out.splitlines() == [f"memdaily: skipped, no {tmp_path / 'memdaily'}",
                                                    f"realmem: skipped, no {tmp_path / 'realmem'}"]
    with pytest.raises(ValueError, match="unknown dev set"):
        list(load_sets(tmp_path, ["nosuchset"], NOW))


def test_paired_bootstrap_verdicts():
    better, worse = [1.0] * 40 + [0.0] * 60, [0.0] * 100
    assert paired_bootstrap(better, worse)["verdict"] == "better"
    assert paired_bootstrap(worse, better)["verdict"] == "worse"
    swap = [1.0, 0.0] * 50  # wins and losses in equal numbers
    result = paired_bootstrap(swap, swap[1:] + swap[:1])
    assert result["verdict"] == "within noise" and result["low"] < 0 < result["high"] and result["diff"] == 0
    assert paired_bootstrap(better, worse, seed=3) == paired_bootstrap(better, worse, seed=3)


def test_reciprocal_rank_fusion_favours_ids_both_runs_rank():
    assert fused({"q": ["a", "b"]}, {"q": ["b", "c"]}) == {"q": ["b", "a", "c"]}
