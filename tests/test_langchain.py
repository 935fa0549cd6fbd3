"""LangChain and LangGraph on Mneme, with the real libraries against the real stack (a fake chat model from
langchain-core where a model is needed; no LLM endpoint): the chat history is the session's working memory,
the store is recall and beliefs, and the memory tools change what the user's memory holds."""

import uuid

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel, FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.store.base import BaseStore
from mneme_client import MnemeClient
from mneme_client.langchain import MnemeChatMessageHistory, MnemeStore, memory_tools

from memory import ids
from tests.polling import wait_until


@pytest.fixture
def mneme(stack):
    with MnemeClient(stack.api_url) as client:
        yield client


def settled(mneme, user):
    """Once every message of the user is in long-term memory."""
    def done():
        sessions = mneme.sessions(user).sessions
        jobs = [mneme.job(job_id) for s in sessions for job_id in _job_ids(mneme, user, s.session_id)]
        return all(j.state in ("done", "retracted", "dropped", "failed") for j in jobs)
    wait_until(done, 60, "the user's messages in long-term memory")


def _job_ids(mneme, user, session_id):
    return [ids.job_id("default", session_id, m.message_id) for m in mneme.messages(session_id).messages]


def test_chat_history_is_the_sessions_working_memory_with_undo_and_clear(mneme, uid):
    history = MnemeChatMessageHistory(mneme, user_id=f"u{uid}", session_id=f"s{uid}")
    assert history.messages == []
    long_reply = "第一步：画速度-时间图。" + "斜率就是加速度。" * 80
    history.add_messages([SystemMessage("You are a physics tutor."), HumanMessage("我总把加速度和速度搞混"),
                          AIMessage(long_reply), ToolMessage('{"grade": "高二"}', tool_call_id="t1")])
    got = history.messages
    assert [type(m) for m in got] == [SystemMessage, HumanMessage, AIMessage, ToolMessage]
    assert got[2].content == long_reply  # the window keeps it cut; the history reads it whole
    assert [type(m) for m in history.undo()] == [ToolMessage]
    assert len(history.messages) == 3
    settled(mneme, f"u{uid}")
    assert ("learning_obstacle", "加速度") in {(b.relation, b.object) for b in mneme.profile(f"u{uid}").beliefs}
    history.clear()
    assert history.messages == [] and mneme.profile(f"u{uid}").beliefs == []  # the session and what came of it


def test_a_graph_answers_from_the_history_and_keeps_the_turns_in_it(mneme, uid):
    """The history is what a model sees: each turn reads the window, and the turn is written back."""
    model = FakeListChatModel(responses=["你好，小明！", "你叫小明。"])
    seen: list[int] = []

    def answer(state: MessagesState) -> dict:
        history = MnemeChatMessageHistory(mneme, user_id=f"u{uid}", session_id=f"s{uid}")
        question = state["messages"][-1]
        past = history.messages
        seen.append(len(past))
        reply = model.invoke([*past, question])
        history.add_messages([question, reply])
        return {"messages": [reply]}

    graph = StateGraph(MessagesState)
    graph.add_node("answer", answer)
    graph.add_edge(START, "answer")
    app = graph.compile()
    app.invoke({"messages": [HumanMessage("我叫小明")]})
    app.invoke({"messages": [HumanMessage("我叫什么？")]})
    assert seen == [0, 2]
    window = mneme.messages(f"s{uid}").messages
    assert [(m.role, m.content) for m in window] == [("user", "我叫小明"), ("assistant", "你好，小明！"),
                                                     ("user", "我叫什么？"), ("assistant", "你叫小明。")]
    settled(mneme, f"u{uid}")
    assert ("name", "小明") in {(b.relation, b.object) for b in mneme.profile(f"u{uid}").beliefs}


def test_the_langgraph_store_is_recall_and_beliefs(mneme, uid):
    store = MnemeStore(mneme)
    memories, beliefs = (f"u{uid}", "memories"), (f"u{uid}", "beliefs")
    store.put(memories, "m1", {"content": "My order 4471 arrived with a cracked screen"})
    store.put(memories, "m2", {"content": "我住在杭州，喜欢喝龙井茶"})
    settled(mneme, f"u{uid}")
    item = store.get(memories, "m1")
    assert item is not None and "cracked screen" in item.value["content"] and item.key == "m1"
    found = store.search(memories, query="我住在哪里？", limit=3)
    assert found and found[0].key == "m2" and found[0].score is not None
    assert {i.key for i in store.search(memories, limit=10)} == {"m1", "m2"}
    assert store.get(beliefs, "location:杭州") is not None
    store.put(beliefs, "occupation:nurse", {"relation": "occupation", "object": "nurse"})
    assert store.get(beliefs, "occupation:nurse").value["source"] == "human"
    assert store.search(beliefs, query="occupation")[0].key == "occupation:nurse"
    store.delete(beliefs, "occupation:nurse")
    assert store.get(beliefs, "occupation:nurse") is None
    store.delete(memories, "m1")  # taken back: out of working memory and every long-term layer
    assert store.get(memories, "m1") is None and ("order_history", "4471") not in {
        (b.relation, b.object) for b in mneme.profile(f"u{uid}").beliefs}
    assert store.list_namespaces(prefix=(f"u{uid}",)) == [beliefs, memories]
    with pytest.raises(ValueError, match="namespace"):
        store.get(("just-a-user",), "m1")


def test_a_memory_merged_into_another_sessions_event_is_still_got_and_deleted_by_its_own_key(mneme, uid):
    """The same thing said in three sessions is one event (the first message's); a key still names its own
    message: getting it gives that message's session, and deleting it takes back that message alone."""
    store, user = MnemeStore(mneme), f"u{uid}"
    memories = (user, "memories")
    for key, session in (("k1", f"a{uid}"), ("k2", f"b{uid}"), ("k3", f"c{uid}")):  # one at a time, in order
        store.put(memories, key, {"content": "我最喜欢喝杭州的龙井茶", "session_id": session})
        settled(mneme, user)
    rows = {e.message_ids[0]: e for e in mneme.events(user, limit=50).events}
    assert rows["k2"].canonical_id == rows["k1"].event_id and set(rows["k1"].message_ids) == {"k1", "k2", "k3"}
    item = store.get(memories, "k2")
    assert item is not None and item.key == "k2" and item.value["session_id"] == f"b{uid}"
    store.delete(memories, "k2")
    assert [m.message_id for m in mneme.messages(f"b{uid}").messages] == []
    assert [m.message_id for m in mneme.messages(f"a{uid}").messages] == ["k1"]
    assert store.get(memories, "k2") is None and store.get(memories, "k1").value["session_id"] == f"a{uid}"


def test_a_langgraph_node_reads_and_writes_memory_through_the_injected_store(mneme, uid):
    def remember_and_recall(state: MessagesState, *, store: BaseStore) -> dict:
        namespace = (f"u{uid}", "memories")
        question = state["messages"][-1].content
        store.put(namespace, uuid.uuid4().hex, {"content": question, "session_id": f"g{uid}"})
        return {"messages": [AIMessage(f"noted {len(store.search(namespace, limit=5))}")]}

    graph = StateGraph(MessagesState)
    graph.add_node("memory", remember_and_recall)
    graph.add_edge(START, "memory")
    app = graph.compile(store=MnemeStore(mneme))
    out = app.invoke({"messages": [HumanMessage("I'm a nurse and I live in Berlin")]})
    assert out["messages"][-1].content.startswith("noted")
    settled(mneme, f"u{uid}")
    assert {("occupation", "nurse"), ("location", "Berlin")} <= {
        (b.relation, b.object) for b in mneme.profile(f"u{uid}").beliefs}


def test_memory_tools_called_by_a_model_change_what_is_remembered(mneme, uid):
    user = f"u{uid}"
    tools = {t.name: t for t in memory_tools(mneme, user_id=user, session_id=f"s{uid}")}
    assert set(tools) == {"remember", "recall", "profile", "correct", "forget"}
    assert tools["profile"].invoke({}).startswith("nothing is known about this user")  # a user never seen
    calls = [{"name": "remember", "args": {"content": "我今年15岁，我喜欢天文学"}, "id": "c1"}]
    model = FakeMessagesListChatModel(responses=[AIMessage("", tool_calls=calls)])
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode(list(tools.values())))
    graph.add_edge(START, "tools")
    ran = graph.compile().invoke({"messages": [model.invoke("remember this")]})
    assert ran["messages"][-1].content.startswith("remembered")
    settled(mneme, user)
    assert "likes: 天文学" in tools["profile"].invoke({})
    assert "age: 15" in tools["recall"].invoke({"query": "我几岁？"})
    assert "age = 16" in tools["correct"].invoke({"relation": "age", "value": "16"})
    assert tools["forget"].invoke({"relation": "likes", "value": "天文学"}) == "forgot likes = 天文学"
    held = {(b.relation, b.object, b.source) for b in mneme.profile(user).beliefs}
    assert ("age", "16", "human") in held and not any(r == "likes" for r, _, _ in held)
    assert tools["forget"].invoke({"relation": "likes", "value": "天文学"}).startswith("nothing believed")
