"""docker-compose.yml cannot run here (no Docker engine), so its promises are checked by reading it:
every service, healthcheck and setting the code needs is there and spelled right."""

from pathlib import Path

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
                      ("archive", "MNEME_ARCHIVE_URL"), ("audit", "MNEME_AUDIT_URL")]:
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
