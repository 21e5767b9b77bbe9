"""Find user-visible English that bypasses the catalogs, in templates, Python modules and scripts.

Pragmatic by design: it reads what a user could see (template text and visible attributes, prose-like
strings in Jinja expressions, messages handed to flash/Refused/abort/problem/click.echo, label
tables, strings in static/js) and flags any that are not wrapped in a gettext call. What it flags but
no user reads goes in ALLOWED, with the reason beside it.

    python -m tests.support.i18n_scan [PATH …]     prints path:line: text for each finding
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from jinja2 import Environment

ROOT = Path(__file__).resolve().parents[2]
GAP = "\x00"  # stands for a Jinja expression or tag inside template text
WORD = re.compile(r"[A-Za-z]{2,}")
VISIBLE_ATTRIBUTES = {"title", "aria-label", "aria-description", "alt", "placeholder", "aria-roledescription"}
GETTEXT = {"_", "gettext", "ngettext", "pgettext", "npgettext", "lazy_gettext", "lazy_ngettext", "lazy_pgettext"}
# Calls whose string arguments reach a reader: flashes, refusals, HTTP errors, API problems, CLI output.
MESSAGE_CALLS = {
    "flash",
    "Refused",
    "abort",
    "problem",
    "echo",
    "secho",
    "ClickException",
    "UsageError",
    "BadParameter",
}
MESSAGE_KEYWORDS = {"title", "detail", "description", "message", "help_text"}
CLASS_LIST = re.compile(r"[a-z0-9_-]+(\s+[a-z0-9_-]+)*")
LABEL_TABLE = re.compile(r"(LABELS|MESSAGES|TITLES|NAMES|CHOICES|HEADINGS)$")
# Words that read the same in every language: product and protocol names, units, codes.
NEUTRAL_WORDS = {
    "Hato", "HTMX", "API", "APIs", "JSON", "CSV", "SMTP", "HTTP", "HTTPS", "URL", "URLs", "UTC", "JST", "ID", "IDs",
    "VAPID", "RQ", "DLQ", "HTML", "PNG", "SQL", "JWT", "CSRF", "XSS", "UUID", "PostgreSQL", "Redis", "Markdown",
    "Jinja", "RFC", "ms", "KB", "MB", "px", "OK", "en", "ja", "Web", "Push",
    "Enter", "Shift", "Esc", "Tab", "Ctrl", "Alt",  # key caps read the same on a Japanese keyboard
}  # fmt: skip

# (path relative to the repository, text): seen by the scanner, read by no user. Keep each with its reason.
ALLOWED: set[tuple[str, str]] = {
    ("app/i18n.py", "English"),  # each language's name in that language, as language pickers show it
    ("app/realtime/connection.py", "server going away"),  # websocket close reasons: protocol text for the client code
    ("app/realtime/connection.py", "signed out"),
    ("app/realtime/connection.py", "too many open tabs"),
    ("app/realtime/connection.py", "token expired: fetch a new one"),  # the bell reads the code (4401), not this
    ("app/realtime/connection.py", "token refused"),
}


@dataclass(frozen=True)
class Finding:
    """One piece of English a user could read that no catalog translates."""

    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text!r}"


def is_english(text: str) -> bool:
    """Whether text holds a word a translator would have to change (a list of CSS classes holds none)."""
    if CLASS_LIST.fullmatch(text.replace(GAP, " ").strip()) and re.search(r"--|__", text):
        return False
    words = [w for w in WORD.findall(text.replace(GAP, " ")) if w not in NEUTRAL_WORDS]
    return bool(words)


def is_prose(text: str) -> bool:
    """Whether a string literal reads like a label or a sentence rather than a key, a class or a path."""
    if not is_english(text) or re.search(r"[/{}<>=]|\w[.:]\w|^[a-z0-9_.-]+$", text):
        return False
    capitalised = re.search(r"(^|\s)[A-Z][a-z]+", text)
    words = re.findall(r"(?:^|\s)([A-Za-z]{2,})(?=\s|$|[.,:;!?…])", text)
    identifier_like = re.search(r"[_-]|__", text)
    return bool(capitalised or (len(words) >= 2 and not identifier_like))


# --- templates -------------------------------------------------------------------------------------


UNREAD_TAGS = {"script", "style", "code", "kbd", "samp"}  # not read as prose: code, variable names, key caps


class _VisibleText(HTMLParser):
    """Collects text nodes and visible attribute values (script and style bodies skipped), with lines."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[int, str]] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs) -> None:
        if tag in UNREAD_TAGS:
            self._skip += 1
        attributes = dict(attrs)
        for name, value in attrs:
            visible = name in VISIBLE_ATTRIBUTES or (
                # An input button shows its value; a <button> shows its content, never its value.
                name == "value" and tag == "input" and attributes.get("type") in {"submit", "button"}
            )
            if visible and value:
                self.found.append((self.getpos()[0], value))

    def handle_endtag(self, tag) -> None:
        if tag in UNREAD_TAGS and self._skip:
            self._skip -= 1

    def handle_data(self, data) -> None:
        if not self._skip and data.strip():
            self.found.append((self.getpos()[0], data.strip()))


def scan_template(path: Path, env: Environment | None = None) -> list[Finding]:
    """English in a Jinja template's text, visible attributes and prose-like string literals."""
    env = env or Environment(extensions=["jinja2.ext.i18n"])  # noqa: S701 - only lexed, never rendered
    source = path.read_text(encoding="utf-8")
    relative = str(path.relative_to(ROOT))
    skeleton: list[str] = []
    findings: list[Finding] = []
    tokens = list(env.lex(source))
    in_trans = False
    for index, (lineno, kind, value) in enumerate(tokens):
        if kind == "data":
            skeleton.append(value if not in_trans else "\n" * value.count("\n"))
            continue
        if kind == "name" and value in {"trans", "pluralize"}:
            in_trans = True
        elif kind == "name" and value == "endtrans":
            in_trans = False
        if kind in {"variable_begin", "block_begin"}:
            skeleton.append(GAP)
        dict_key = index + 1 < len(tokens) and tokens[index + 1][1:] == ("operator", ":")
        if kind == "string" and not dict_key and is_prose(text := value[1:-1]) and not _wrapped(tokens, index):
            findings.append(Finding(relative, lineno, text))
    parser = _VisibleText()
    parser.feed("".join(skeleton))
    parser.close()
    findings += [Finding(relative, line, text.replace(GAP, "…")) for line, text in parser.found if is_english(text)]
    return [f for f in findings if (f.path, f.text) not in ALLOWED]


def _wrapped(tokens: list, index: int) -> bool:
    """Whether the string at index sits inside a call of _()/gettext()/ngettext(), at any depth."""
    depth = 0
    for position in range(index - 1, -1, -1):
        _, kind, value = tokens[position]
        if kind in {"variable_begin", "block_begin"}:
            return False
        if kind != "operator":
            continue
        if value in {")", "]", "}"}:
            depth += 1
        elif value in {"(", "[", "{"}:
            if depth:
                depth -= 1
            elif value == "(" and position and tokens[position - 1][1:] in {("name", g) for g in GETTEXT}:
                return True
    return False


# --- Python ----------------------------------------------------------------------------------------


def scan_python(path: Path, refusals: set[str]) -> list[Finding]:
    """English literals handed to message calls or kept in label tables, not wrapped in gettext."""
    relative = str(path.relative_to(ROOT))
    tree = ast.parse(path.read_text(encoding="utf-8"))
    callees = MESSAGE_CALLS | refusals
    findings: list[Finding] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _callee(node) in callees:
            arguments = list(node.args) + [k.value for k in node.keywords if k.arg in MESSAGE_KEYWORDS]
            findings += [Finding(relative, a.lineno, text) for a in arguments if (text := _literal(a))]
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and LABEL_TABLE.search(t.id) for t in node.targets
        ):
            if isinstance(node.value, ast.Dict):
                values = [v for v in node.value.values if v is not None]
                findings += [Finding(relative, v.lineno, text) for v in values if (text := _literal(v))]
    return [f for f in findings if (f.path, f.text) not in ALLOWED]


def _callee(call: ast.Call) -> str | None:
    function = call.func
    if isinstance(function, ast.Name):
        return function.id
    if isinstance(function, ast.Attribute):
        return function.attr
    return None


def _literal(node: ast.AST) -> str | None:
    """The English text of a bare string or f-string argument (None when wrapped in gettext or not text)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
    elif isinstance(node, ast.JoinedStr):
        text = "".join(v.value if isinstance(v, ast.Constant) else GAP for v in node.values)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod | ast.Add):
        return _literal(node.left) or _literal(node.right)
    else:
        return None
    return text if is_english(text) and not re.fullmatch(r"[a-z0-9_.:/-]+", text) else None


def refusal_classes(paths: list[Path]) -> set[str]:
    """Refused and every class derived from it (its messages reach users), across the given modules."""
    parents: dict[str, set[str]] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                parents[node.name] = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
    found = {"Refused"}
    while True:
        more = {name for name, bases in parents.items() if bases & found} - found
        if not more:
            return found
        found |= more


# --- scripts ---------------------------------------------------------------------------------------

# Not text: the strict-mode directive, HTTP header names, feature tests (`"PushManager" in window`), Error() texts
# for the console, and the key names of KeyboardEvent.key.
JS_NOT_TEXT = re.compile(r"""^(use strict|[A-Z][a-z]+(-[A-Z][a-z]+)+|Enter|Escape|ArrowUp|ArrowDown|Tab)$""")
JS_FEATURE_TEST = re.compile(r"""["'](\w+)["']\s+in\s+(window|navigator|self|Notification)""")
JS_STRING = re.compile(r"""(?P<q>["'`])(?P<text>(?:\\.|(?!(?P=q)).)*)(?P=q)""")


def scan_script(path: Path) -> list[Finding]:
    """Prose-like string literals in a static script (its words should come from the page)."""
    relative = str(path.relative_to(ROOT))
    findings = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip().startswith(("//", "*", "/*")):
            continue
        code = line.split(" // ")[0]
        tested = set(JS_FEATURE_TEST.findall(code))
        for match in JS_STRING.finditer(code):
            text = match.group("text")
            if text in {name for name, _ in tested} or JS_NOT_TEXT.match(text) or "new Error(" in code:
                continue
            if is_prose(text) and not re.search(r"[#\[\]()]|^\s*[a-z-]+:", text):
                findings.append(Finding(relative, lineno, text))
    return [f for f in findings if (f.path, f.text) not in ALLOWED]


# --- the whole tree ---------------------------------------------------------------------------------


def python_files() -> list[Path]:
    """Modules whose messages users or operators read (the dev supervisor and tests are not among them)."""
    files = sorted((ROOT / "app").rglob("*.py")) + sorted((ROOT / "jobs").rglob("*.py"))
    return [p for p in files if "devstack" not in p.parts]


def scan(paths: list[Path] | None = None) -> list[Finding]:
    """Every finding in the given files (default: templates, app/ and jobs/ modules, static/js)."""
    every_python = python_files()
    if paths is None:
        paths = sorted((ROOT / "templates").rglob("*.html")) + every_python + sorted((ROOT / "static/js").glob("*.js"))
    refusals = refusal_classes(every_python)
    env = Environment(extensions=["jinja2.ext.i18n"])  # noqa: S701 - only lexed, never rendered
    findings: list[Finding] = []
    for path in paths:
        path = path.resolve()
        if path.suffix == ".html":
            findings += scan_template(path, env)
        elif path.suffix == ".py":
            findings += scan_python(path, refusals)
        elif path.suffix == ".js":
            findings += scan_script(path)
    return findings


def main(argv: list[str]) -> int:
    """Print the findings of the given files or directories (default: everything); exit 1 if any."""
    paths: list[Path] | None = None
    if argv:
        paths = []
        for arg in argv:
            path = Path(arg).resolve()
            paths += (
                sorted(p for p in path.rglob("*") if p.suffix in {".html", ".py", ".js"}) if path.is_dir() else [path]
            )
    findings = scan(paths)
    for finding in findings:
        print(finding)
    print(f"{len(findings)} finding(s)", file=sys.stderr)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
