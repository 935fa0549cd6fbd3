"""The README's examples run as written, against the real stack: the quick start's curl commands (in both
READMEs) remember a message dated now and recall it, and the LangGraph agent answers from memory."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mneme_client import MnemeClient

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "clients" / "python" / "examples" / "langgraph_agent.py"


def test_the_readme_shows_the_example_file_as_it_is():
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    assert EXAMPLE.read_text(encoding="utf-8") in blocks


def test_the_langgraph_example_remembers_where_the_user_lives(stack):
    ran = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=180,
                         env={**os.environ, "MNEME_API_URL": stack.api_url})
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "你住在杭州" in ran.stdout and "('location', '杭州'" in ran.stdout


def quick_start(readme: Path) -> list[str]:
    """The curl commands of the README's first shell block, each on one line."""
    block = re.search(r"```sh\n(.*?)```", readme.read_text(encoding="utf-8"), re.S).group(1)
    return [line for line in block.replace("\\\n", " ").splitlines() if line.startswith("curl ")]


def bash(command: str) -> dict:
    ran = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


@pytest.mark.parametrize("readme", ["README.md", "README.zh.md"])
def test_the_quick_starts_curl_commands_remember_a_message_of_now_and_recall_it(stack, uid, readme):
    """As a reader pastes them into bash (on the stack's port, for a user of this test's own): the message they
    send is dated now — it was a year old once, and recall's "last week" would not have found it."""
    user, session = f"u{uid}", f"s{uid}"
    mine = {"http://127.0.0.1:8080": stack.api_url, "/users/u1/": f"/users/{user}/",
            '"user_id":"u1"': f'"user_id":"{user}"', '"session_id":"s1"': f'"session_id":"{session}"'}
    consent, message, recall = [re.sub("|".join(map(re.escape, mine)), lambda m: mine[m[0]], command)
                                for command in quick_start(ROOT / readme)]
    assert bash(consent)["long_term"] is True
    accepted = bash(message)
    assert abs(accepted["client_ts"] - time.time()) < 60, accepted
    with MnemeClient(stack.api_url) as client:
        assert client.wait([accepted["job_id"]])[0].state == "done"
    assert ("age", "17") in {(f["relation"], f["object"]) for f in bash(recall)["facts"]}
