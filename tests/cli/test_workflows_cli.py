"""`flask workflows export | apply`: workflows as YAML files, checked as a whole, applied in one transaction."""

from __future__ import annotations

import pytest
import yaml

from app.extensions import db
from app.models import AuditEntry
from app.workflows import files, queries, service
from tests.factories import NotificationTypeFactory

# The issue's example: in-app now; unread after 30 min, push; still unread 4 h later and a large amount, SMS;
# otherwise the daily digest.
ISSUE_EXAMPLE = [
    {"kind": "channel", "channel": "in_app"},
    {"kind": "delay", "seconds": 1800},
    {"kind": "channel", "channel": "push", "only_if": ["unread"]},
    {"kind": "delay", "seconds": 14400},
    {"kind": "channel", "channel": "sms", "only_if": ["unread"], "condition": "data.amount > 10000"},
    {"kind": "digest", "frequency": "daily", "only_if": ["unread"], "condition": "!(data.amount > 10000)"},
]
EDITED = [{"kind": "channel", "channel": "in_app"}, {"kind": "delay", "seconds": 600},
          {"kind": "channel", "channel": "email", "only_if": ["unseen"]}]  # fmt: skip


@pytest.fixture
def types(app):
    """Two types at version 1, and `payment` at version 2 (the issue's example, with a condition that starts
    with "!", which YAML must quote)."""
    NotificationTypeFactory(type="comment", default_email=True)
    NotificationTypeFactory(type="payment")
    service.save_draft(None, "payment", {"steps": ISSUE_EXAMPLE})
    service.publish(None, "payment", note="the issue's example")
    db.session.query(AuditEntry).delete()  # the setup's own entries: the tests look for the command's
    return ["comment", "payment"]


def run(app, *args):
    return app.test_cli_runner().invoke(args=["workflows", *map(str, args)])


def audit(action: str) -> list[AuditEntry]:
    return db.session.query(AuditEntry).filter_by(action=action).order_by(AuditEntry.id).all()


def write(path, document) -> None:
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")


def test_export_writes_a_file_per_type_with_its_version_and_apply_finds_nothing_changed(app, types, tmp_path):
    exported = run(app, "export", tmp_path / "wf")
    assert exported.exit_code == 0, exported.output
    assert sorted(p.name for p in (tmp_path / "wf").iterdir()) == ["comment.yaml", "payment.yaml"]
    text = (tmp_path / "wf" / "payment.yaml").read_text(encoding="utf-8")
    assert text.splitlines()[0] == "# payment: workflow version 2, written by `flask workflows export`"
    assert yaml.safe_load(text) == {"type": "payment", "steps": ISSUE_EXAMPLE}
    assert "payment.yaml: version 2" in exported.output

    applied = run(app, "apply", tmp_path / "wf", "--publish")

    assert applied.exit_code == 0, applied.output
    assert "comment: unchanged" in applied.output and "payment: unchanged" in applied.output
    assert "2 unchanged, 0 drafted, 0 published." in applied.output
    assert queries.published("payment").version == 2 and queries.published("comment").version == 1
    assert queries.draft("comment") is None and audit("workflow.draft") == []


def test_export_leaves_the_file_of_a_type_that_is_gone_and_says_so(app, types, tmp_path):
    (tmp_path / "retired.yaml").write_text("type: retired\nsteps: []\n")
    result = run(app, "export", tmp_path)
    assert result.exit_code == 0
    assert "retired.yaml: there is no type retired any more" in result.output
    assert (tmp_path / "retired.yaml").read_text() == "type: retired\nsteps: []\n"


def test_an_edited_file_shows_its_diff_and_becomes_the_draft(app, types, tmp_path):
    run(app, "export", tmp_path)
    write(tmp_path / "comment.yaml", {"type": "comment", "steps": EDITED})

    result = run(app, "apply", tmp_path)

    assert result.exit_code == 0, result.output
    assert "--- comment, published version 1" in result.output
    assert f"+++ {tmp_path / 'comment.yaml'}" in result.output
    assert "+- kind: delay\n+  seconds: 600\n" in result.output
    assert "payment: unchanged" in result.output
    assert "1 unchanged, 1 drafted, 0 published." in result.output
    assert queries.draft("comment").steps == {"steps": EDITED}
    assert queries.published("comment").version == 1  # a draft runs nowhere yet
    [entry] = audit("workflow.draft")
    assert (entry.actor_label, entry.target_id) == ("cli", "comment")


def test_publish_makes_the_next_version_with_the_note(app, types, tmp_path):
    run(app, "export", tmp_path)
    write(tmp_path / "comment.yaml", {"type": "comment", "steps": EDITED})

    result = run(app, "apply", tmp_path, "--publish", "--note", "from git abc123")

    assert result.exit_code == 0, result.output
    assert "comment: published as version 2" in result.output
    assert "1 unchanged, 0 drafted, 1 published." in result.output
    version = queries.published("comment")
    assert (version.version, version.note, version.steps) == (2, "from git abc123", {"steps": EDITED})
    assert queries.draft("comment") is None
    [entry] = [e for e in audit("workflow.publish") if e.target_id == "comment"]
    assert entry.actor_label == "cli" and entry.after["version"] == 2
    assert "2 unchanged, 0 drafted" in run(app, "apply", tmp_path).output  # applied again: nothing to do


def test_dry_run_shows_the_diff_and_writes_nothing(app, types, tmp_path):
    run(app, "export", tmp_path)
    write(tmp_path / "comment.yaml", {"type": "comment", "steps": EDITED})

    result = run(app, "apply", tmp_path, "--dry-run", "--publish")

    assert result.exit_code == 0, result.output
    assert "+  seconds: 600" in result.output
    assert "Dry run: 1 unchanged, 1 to change; nothing was written." in result.output
    assert queries.draft("comment") is None and queries.published("comment").version == 1
    assert audit("workflow.draft") == []


def test_one_invalid_file_stops_every_file_and_names_each_problem(app, types, tmp_path):
    run(app, "export", tmp_path)
    write(tmp_path / "comment.yaml", {"type": "comment", "steps": EDITED})  # valid, but must not be applied
    steps = [*ISSUE_EXAMPLE[:4], {"kind": "channel", "channel": "sms", "condition": "data.amount >"},
             {"kind": "teleport"}]  # fmt: skip
    write(tmp_path / "payment.yaml", {"type": "payment", "steps": steps})

    result = run(app, "apply", tmp_path, "--publish")

    assert result.exit_code == 1
    assert "payment.yaml: step 5 condition: " in result.stderr
    assert "payment.yaml: step 6 kind: The kind is one of" in result.stderr
    assert "Nothing was changed" in result.stderr
    assert "comment.yaml" not in result.stderr and "drafted" not in result.output
    assert queries.draft("comment") is None and queries.published("comment").version == 1
    assert audit("workflow.draft") == []


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("ghost.yaml", "type: ghost\nsteps: [{kind: channel, channel: in_app}]\n", "no notification type 'ghost'"),
        ("comment.yaml", "type: payment\nsteps: [{kind: channel, channel: in_app}]\n", "does not match the file"),
        ("comment.yaml", "steps: [{kind: channel, channel: in_app}]\n", "type: missing"),
        ("comment.yaml", "- type: comment\n- steps: []\n", "not a mapping"),
        ("comment.yaml", "", "not a mapping"),
        ("comment.yaml", "type: comment\nsteps: [{kind: channel, 1: x}]\n", "field names are text"),
        ("comment.yaml", "type: comment\nsteps: [unclosed\n", "not YAML that Hato reads"),
        ("comment.yaml", "type: comment\nsteps: []\n", "1 to 20 steps"),
        ("comment.yaml", "type: comment\nowner: me\nsteps: [{kind: channel, channel: in_app}]\n", "owner: Unknown"),
    ],
)
def test_a_file_that_is_not_a_workflow_is_named_and_nothing_changes(app, types, tmp_path, name, text, message):
    write(tmp_path / "payment.yaml", {"type": "payment", "steps": EDITED})  # valid, but must not be applied
    (tmp_path / name).write_text(text, encoding="utf-8")

    result = run(app, "apply", tmp_path)

    assert result.exit_code == 1
    assert f"{name}: " in result.stderr and message in result.stderr
    assert queries.draft("payment") is None and audit("workflow.draft") == []


def test_a_python_tag_is_refused_not_constructed(app, types, tmp_path):
    marker = tmp_path / "constructed"
    text = f"type: !!python/object/apply:os.system ['touch {marker}']\nsteps: []\n"
    (tmp_path / "comment.yaml").write_text(text, encoding="utf-8")

    result = run(app, "apply", tmp_path)

    assert result.exit_code == 1
    assert "comment.yaml: not YAML that Hato reads: could not determine a constructor" in result.stderr
    assert "line 1" in result.stderr and not marker.exists()


def test_a_file_over_the_limit_is_not_read(app, types, tmp_path):
    padding = "#" * files.MAX_FILE_BYTES
    (tmp_path / "comment.yaml").write_text(f"type: comment\n{padding}\nsteps: []\n", encoding="utf-8")
    result = run(app, "apply", tmp_path)
    assert result.exit_code == 1 and "comment.yaml: larger than 256 KB" in result.stderr


def test_an_empty_directory_is_an_error_and_a_long_note_is_refused(app, types, tmp_path):
    empty = run(app, "apply", tmp_path)
    assert empty.exit_code == 1 and "has no .yaml files" in empty.stderr
    run(app, "export", tmp_path)
    long_note = run(app, "apply", tmp_path, "--publish", "--note", "x" * 501)
    assert long_note.exit_code == 2 and "at most 500 characters" in long_note.stderr


def test_types_without_a_file_are_listed_and_a_draft_being_edited_is_named_when_replaced(app, types, tmp_path):
    service.save_draft(None, "comment", {"steps": ISSUE_EXAMPLE})  # an operator's draft in the console
    write(tmp_path / "comment.yaml", {"type": "comment", "steps": EDITED})

    result = run(app, "apply", tmp_path)

    assert result.exit_code == 0, result.output
    assert "Types without a file (left as they are): payment" in result.output
    assert "comment: the file replaces its unpublished draft" in result.output
    assert queries.draft("comment").steps == {"steps": EDITED} and queries.published("payment").version == 2
