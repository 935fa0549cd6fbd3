"""The README's LangGraph example runs as written, against the real stack, and the agent answers from memory."""

import os
import re
import subprocess
import sys
from pathlib import Path

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
