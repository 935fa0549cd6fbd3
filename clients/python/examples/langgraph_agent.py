# A LangGraph agent that remembers its user across conversations, on a running Mneme (`make run`).
import os

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import HumanMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.base import BaseStore
from mneme_client import MnemeClient
from mneme_client.langchain import MnemeChatMessageHistory, MnemeStore

mneme = MnemeClient(os.environ.get("MNEME_API_URL", "http://127.0.0.1:8080"))
model = FakeListChatModel(responses=["好的，记住了！", "你住在杭州。"])  # any LangChain chat model
history = MnemeChatMessageHistory(mneme, user_id="u1", session_id="chat-1")  # the session's working memory


def answer(state: MessagesState, *, store: BaseStore) -> dict:
    question = state["messages"][-1]
    remembered = store.search(("u1", "memories"), query=question.content, limit=3)  # long-term memory
    context = "; ".join(item.value["content"] for item in remembered)
    reply = model.invoke([*history.messages, HumanMessage(f"{question.content}\n(remembered: {context})")])
    history.add_messages([question, reply])
    return {"messages": [reply]}


graph = StateGraph(MessagesState)
graph.add_node("answer", answer)
graph.add_edge(START, "answer")
app = graph.compile(store=MnemeStore(mneme))

mneme.consent("u1")  # long-term memory is off until the user opts in
app.invoke({"messages": [HumanMessage("我住在杭州")]})
history.settle()  # extraction runs in Mneme's workers: wait for it here (an agent need not)
print(app.invoke({"messages": [HumanMessage("我住在哪里？")]})["messages"][-1].content)
print([(b.relation, b.object, b.confidence) for b in mneme.profile("u1").beliefs])
