"""docker-compose.yml cannot run here (no Docker engine), so its promises are checked by reading it:
every service, healthcheck and setting the code needs is there and spelled right."""

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from memory.registry import BACKENDS
from memory.settings import Settings
from workers.celery_app import QUEUES

COMPOSE = yaml.safe_load((Path(__file__).parent.parent / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
MNEME = {name: svc for name, svc in SERVICES.items() if svc.get("image") == "mneme:dev"}


def test_every_service_is_there_with_a_healthcheck():
    assert {"redis", "weaviate", "neo4j", "elasticsearch", "minio", "api", "beat", "flower"} <= set(SERVICES)
    for name, svc in SERVICES.items():
        assert "healthcheck" in svc and svc["healthcheck"]["test"], f"{name} has no healthcheck"


def test_redis_keeps_an_append_only_file():
    assert "--appendonly" in SERVICES["redis"]["command"] and "yes" in SERVICES["redis"]["command"]


def test_worker_groups_cover_every_queue_and_scale_independently():
    workers = {n: s for n, s in MNEME.items() if "worker" in s["command"]}
    consumed = {q for s in workers.values() for q in s["command"][s["command"].index("-Q") + 1].split(",")}
    assert consumed == set(QUEUES)
    assert len(workers) >= 3
    for svc in workers.values():
        assert "container_name" not in svc and not svc.get("ports")  # --scale needs neither


def test_workers_and_beat_yield_the_cpu_to_the_api():
    background = {n: s for n, s in MNEME.items() if "worker" in s["command"] or "beat" in s["command"]}
    assert len(background) >= 4
    for name, svc in background.items():
        assert svc.get("cpu_shares", 1024) < SERVICES["api"].get("cpu_shares", 1024), name


def test_all_config_is_environment_and_every_variable_is_a_real_setting():
    fields = set(Settings.model_fields)
    for name, svc in MNEME.items():
        env = svc["environment"]
        for var in env:
            if var.startswith("MNEME_"):
                assert var[len("MNEME_"):].lower() in fields, f"{name}: {var} is not a setting"
        for var in ("MNEME_REDIS_URL", "MNEME_EPISODIC_URL", "MNEME_GRAPH_URL", "MNEME_ARCHIVE_URL",
                    "MNEME_AUDIT_URL", "MNEME_MASTER_KEY", "MNEME_AUTH_REQUIRED"):
            assert env.get(var), f"{name} lacks {var}"
        assert env["MNEME_AUTH_REQUIRED"] == "true"


def test_backend_urls_name_registered_adapters_whose_extras_the_image_installs():
    env = MNEME["api"]["environment"]
    build = COMPOSE["x-mneme"]["build"]["dockerfile_inline"]
    for role, var in [("episodic", "MNEME_EPISODIC_URL"), ("graph", "MNEME_GRAPH_URL"),
                      ("archive", "MNEME_ARCHIVE_URL"), ("audit", "MNEME_AUDIT_URL"), ("keys", "MNEME_KEYS_URL")]:
        scheme = env[var].split("://", 1)[0]
        assert scheme in BACKENDS[role], f"{var}: no {role} adapter for {scheme}://"
        extra = BACKENDS[role][scheme][1]
        assert not extra or extra in build, f"the image does not install the [{extra}] extra"


def test_services_wait_for_their_backends_and_run_the_documented_commands():
    for name, svc in MNEME.items():
        assert {"redis", "weaviate", "neo4j", "minio", "elasticsearch"} <= set(svc["depends_on"]), name
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    assert "uvicorn workers.api:create_app --factory" in readme
    assert SERVICES["api"]["command"][:3] == ["uvicorn", "workers.api:create_app", "--factory"]


def test_flower_has_basic_auth():
    assert SERVICES["flower"]["environment"].get("FLOWER_BASIC_AUTH")


# --- secrets fail closed -------------------------------------------------------------------------
# Compose interpolates ``${VAR}``, ``${VAR:-default}`` / ``${VAR-default}`` (a fallback) and ``${VAR:?message}`` /
# ``${VAR?message}`` (required: `docker compose` refuses to start and prints the message); ``$$`` is a literal $.

REFERENCE = re.compile(r"(?<!\$)\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")
SECRET_NAME = re.compile(r"PASSWORD|SECRET|_KEY$|_KEYS$|TOKEN|BASIC_AUTH|_AUTH$")
NOT_SECRET = {"MNEME_S3_ACCESS_KEY"}  # an access key id names the user, as MINIO_ROOT_USER does
SECRETS = {"MNEME_MASTER_KEY", "REDIS_PASSWORD", "NEO4J_PASSWORD", "ELASTIC_PASSWORD", "MNEME_S3_SECRET_KEY",
           "FLOWER_BASIC_AUTH", "MNEME_WEAVIATE_API_KEY"}


def strings(node: object) -> Iterator[tuple[str, str]]:
    """Every (mapping key, string value) of the file; list items carry the key of their list."""
    stack: list[tuple[str, object]] = [("", node)]
    while stack:
        key, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((str(k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((key, v) for v in value)
        elif isinstance(value, str):
            yield key, value


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's interpolation, enough for this file: a required variable that is unset or empty raises."""
    def one(m: re.Match) -> str:
        name, op, arg = m["name"], m["op"], m["arg"]
        got = env.get(name)
        if op in (":?", "?") and (got is None or (op == ":?" and not got)):
            raise ValueError(f"required variable {name} is missing a value: {arg}")
        if op in (":-", "-") and (got is None or (op == ":-" and not got)):
            return arg
        return got or ""
    return REFERENCE.sub(one, value)


def published_ports(svc: dict) -> list[tuple[str, str]]:
    """(host ip, host port) of each published port; '' for no host ip (all interfaces)."""
    out = []
    for port in svc.get("ports", []):
        if isinstance(port, dict):
            out.append((port.get("host_ip", ""), str(port.get("published", ""))))
        else:
            parts = str(port).rsplit(":", 2)
            out.append(("" if len(parts) < 3 else parts[0], parts[-2] if len(parts) > 1 else parts[-1]))
    return out


def test_no_secret_falls_back_to_a_default():
    for key, value in strings(COMPOSE):
        for m in REFERENCE.finditer(value):
            if SECRET_NAME.search(m["name"]) or SECRET_NAME.search(key):
                assert m["op"] in (":?", "?"), f"{key}: ${{{m['name']}}} must be required (${{X:?...}}), not defaulted"


def test_every_secret_is_a_required_variable_whose_message_names_it():
    required = {m["name"]: m["arg"] for _, v in strings(COMPOSE) for m in REFERENCE.finditer(v)
                if m["op"] == ":?"}
    assert SECRETS <= set(required), f"not required: {SECRETS - set(required)}"
    for name, message in required.items():
        assert name in message, f"${{{name}:?...}} should say which variable to set"
    for key, value in strings(COMPOSE):  # a secret's value is never written out in the file
        if SECRET_NAME.search(key) and key not in NOT_SECRET:
            assert REFERENCE.search(value), f"{key} holds a literal secret"
        for user_info in re.findall(r"://([^/@\s]*)@", value):
            assert REFERENCE.fullmatch(user_info.split(":", 1)[-1]), f"{key}: a URL with a literal password"


def test_without_a_secret_the_stack_refuses_to_start_naming_it():
    full = {name: "x" * 16 for name in SECRETS}
    for _, value in strings(COMPOSE):
        interpolate(value, full)  # with every secret set, the file resolves
    for missing in SECRETS:
        env = {k: v for k, v in full.items() if k != missing}
        with pytest.raises(ValueError, match=missing):
            for _, value in strings(COMPOSE):
                interpolate(value, env)


def test_flower_and_every_other_port_is_published_on_loopback_only():
    assert published_ports(SERVICES["flower"]) == [("127.0.0.1", "5555")]
    for name, svc in SERVICES.items():
        for host_ip, port in published_ports(svc):
            assert host_ip == "127.0.0.1", f"{name} publishes {port} on every interface"


def test_redis_requires_a_password_that_every_client_and_the_healthcheck_use():
    redis_svc = SERVICES["redis"]
    command = redis_svc["command"]
    password = command[command.index("--requirepass") + 1]
    assert REFERENCE.fullmatch(password)["op"] == ":?"
    name = REFERENCE.fullmatch(password)["name"]
    assert not redis_svc.get("ports")
    for svc_name, svc in MNEME.items():
        url = svc["environment"]["MNEME_REDIS_URL"]
        assert url.startswith("redis://:${" + name + ":?"), f"{svc_name}: MNEME_REDIS_URL has no password"
    auth = redis_svc.get("environment", {}).get("REDISCLI_AUTH", "")
    assert "${" + name + ":?" in auth or "-a" in redis_svc["healthcheck"]["test"]


def test_weaviate_takes_only_mnemes_api_key():
    env = SERVICES["weaviate"]["environment"]
    assert str(env.get("AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED")).lower() == "false"
    assert str(env.get("AUTHENTICATION_APIKEY_ENABLED")).lower() == "true"
    key = REFERENCE.fullmatch(env["AUTHENTICATION_APIKEY_ALLOWED_KEYS"])
    assert key and key["op"] == ":?"
    for name, svc in MNEME.items():
        assert svc["environment"]["MNEME_WEAVIATE_API_KEY"] == env["AUTHENTICATION_APIKEY_ALLOWED_KEYS"], name


def test_backend_healthchecks_log_in_with_the_configured_secret():
    neo4j = " ".join(SERVICES["neo4j"]["healthcheck"]["test"])
    assert "$${NEO4J_AUTH" in neo4j
    es = " ".join(SERVICES["elasticsearch"]["healthcheck"]["test"])
    assert "$$ELASTIC_PASSWORD" in es and "ELASTIC_PASSWORD" in SERVICES["elasticsearch"]["environment"]
