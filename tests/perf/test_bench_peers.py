"""bench_peers' options and the Django project it writes for the peer (the bench itself runs in `make bench`)."""

from __future__ import annotations

import ast

import pytest

from tests.perf import bench_peers


def test_defaults_are_the_issues_sizes():
    args = bench_peers.parse_args([])
    assert (args.users, args.per_user, args.heavy_rows, args.inserts, args.batch) == (10_000, 100, 100_000, 10_000, 100)
    params = bench_peers.data_params(args)
    assert params["heavy"] == 10_001 and params["actor"] == 10_002 and params["unread"] == 5


@pytest.mark.parametrize(
    "argv",
    [["--users", "41"], ["--users", "100", "--inserts", "200"], ["--batch", "1001"], ["--heavy-rows", "1000"]],
)
def test_sizes_it_cannot_measure_are_refused(argv, capsys):
    with pytest.raises(SystemExit):
        bench_peers.parse_args(argv)
    assert "must" in capsys.readouterr().err


def test_the_peer_project_names_its_own_database_and_the_package(tmp_path):
    url = "postgresql://bench:pw@127.0.0.1:5432/hato_bench_peers_django"
    script = bench_peers.write_peer_project(tmp_path, url, "s" * 64)
    settings = (tmp_path / "peer_settings.py").read_text()
    namespace: dict = {}
    exec(compile(settings, "peer_settings.py", "exec"), namespace)  # noqa: S102 - the file this test just wrote
    assert namespace["INSTALLED_APPS"][-1] == "notifications"
    database = namespace["DATABASES"]["default"]
    assert (database["NAME"], database["USER"], database["HOST"], database["PORT"]) == (
        "hato_bench_peers_django",
        "bench",
        "127.0.0.1",
        "5432",
    )
    source = script.read_text()
    ast.parse(source)  # the peer's python runs it: it must at least be valid Python
    assert "user.notifications.unread().count()" in source and "mark_all_as_read()" in source


def test_the_peers_venv_is_pinned_and_not_hatos():
    assert all("==" in pin for pin in bench_peers.PEER_PINS)
    assert bench_peers.PEER_PINS[0].startswith("django-notifications-hq==")
    assert bench_peers.VENV.name == "bench-peers-venv" and ".venv" not in bench_peers.VENV.parts
