"""`make demo`: start the stack, play a two-session conversation (zh + en), recall in session 2 on
another device, print it, shut down. Exits 0 only if recall holds what session 1 said."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from mneme_client import MnemeClient

from workers.local.stack import Stack, free_port

USER = "demo_student"
SESSION_1 = [
    ("user", "你好！"),
    ("user", "我今年17岁，上高二"),
    ("user", "我喜欢用动画学物理"),
    ("assistant", "好的！我们可以用小车动画来看速度怎么变化。"),
    ("user", "我总把加速度和速度搞混"),
    ("user", "I prefer short answers"),
]
QUESTION = "加速度和速度到底有什么区别？"

#: (relation, object) pairs recall must return in session 2
EXPECTED = {("age", "17"), ("grade", "高二"), ("likes", "用动画学物理"), ("learning_obstacle", "加速度"),
            ("learning_obstacle", "速度"), ("response_preference", "short answers")}


def play(client: MnemeClient) -> bool:
    start = time.time() - 3600
    client.consent(USER, operator_id="demo")  # long-term memory is off until the user opts in
    print(f"  {USER} opted in to long-term memory")
    jobs = []
    for i, (role, text) in enumerate(SESSION_1):
        accepted = client.remember(user_id=USER, session_id=f"{USER}-s1", device_id=f"{USER}-phone",
                                   message_id=f"s1-{i}",
                                   role=role, content=text, client_ts=start + i)
        jobs.append(accepted.job_id)
        print(f"  session 1 (phone)  {role:9} {text}")
    for job in client.wait(jobs, timeout=120):
        if job.state != "done":
            print(f"job {job.job_id} {job.state}: {job.error}")
            return False

    asked = client.remember(user_id=USER, session_id=f"{USER}-s2", device_id=f"{USER}-laptop", message_id="s2-0",
                            role="user", content=QUESTION)
    print(f"\n  session 2 (laptop) user      {QUESTION}\n")
    result = client.recall(user_id=USER, session_id=f"{USER}-s2", query=QUESTION, k=5)
    client.wait([asked.job_id], timeout=60)

    print("recall → facts (what the agent believes about the user):")
    for f in result.facts:
        print(f"  {f.relation:20} {f.object:16} confidence={f.confidence:.2f}  source={f.source}  "
              f"from={f.message_ids}  ({f.why})")
    print("recall → events (what happened before):")
    for e in result.events:
        print(f"  {e.event_type:18} {e.summary:28} score={e.score:.4f} from={e.message_ids}")
    print("recall → working memory of session 2:")
    for m in result.working:
        print(f"  v{m.version} {m.role:9} {m.content}")
    print(f"took {result.took_ms} ms")

    got = {(f.relation, f.object) for f in result.facts}
    missing = EXPECTED - got
    confusion = any("s1-4" in e.message_ids for e in result.events)
    if missing or not confusion:
        print(f"\nFAIL: missing facts {sorted(missing)}; confusion event recalled: {confusion}")
        return False
    print("\nOK: session 2 on another device recalls what the user said in session 1.")
    return True


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="mneme-demo-") as tmp:
        stack = Stack(Path(tmp), api_port=free_port(), flower_port=free_port(), env={"MNEME_REDIS_URL": ""})
        print("starting the stack (embedded Valkey, API, workers, beat, Flower)…", flush=True)
        try:
            stack.start()
            with MnemeClient(stack.api_url) as client:
                return 0 if play(client) else 1
        finally:
            stack.stop()


if __name__ == "__main__":
    sys.exit(main())
