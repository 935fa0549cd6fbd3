"""The TypeScript client (``clients/typescript``): its types are generated from the running API's OpenAPI document
(the committed file must be what the generator writes now), it compiles under ``tsc --strict``, and its tests run
with Node.js against the real API."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "clients" / "typescript"
NODE = shutil.which("node") or "node"


@pytest.fixture(autouse=True)
def _installed() -> None:
    assert shutil.which("node"), "Node.js 18+ is needed for the TypeScript client's tests"
    assert (PACKAGE / "node_modules" / "typescript").exists(), "run `make install-dev` (npm ci in clients/typescript)"


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), cwd=PACKAGE, capture_output=True, text=True, timeout=180,
                          env={**os.environ, **env})


def test_the_types_are_what_the_generator_writes_from_the_apis_openapi_document(stack, tmp_path):
    done = run(NODE, "scripts/generate.mjs", f"{stack.api_url}/openapi.json", str(tmp_path / "types.ts"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "types.ts").read_text() == (PACKAGE / "src" / "types.ts").read_text(), (
        "the API changed: regenerate with `node scripts/generate.mjs http://127.0.0.1:8080/openapi.json` in "
        "clients/typescript")


def test_the_client_compiles_strictly_and_passes_its_tests_against_the_real_api(stack):
    built = run(NODE, "node_modules/typescript/bin/tsc", "-p", "tsconfig.json")
    assert built.returncode == 0, built.stdout + built.stderr
    tested = run(NODE, "--test", "test/", MNEME_API_URL=stack.api_url)
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-2000:]
    assert "# pass 4" in tested.stdout and "# skipped 0" in tested.stdout
