"""The command line as documented (#17, #21): every task's options follow one convention, usage
errors exit 2, and every `invoke …` command the README and docs/ show runs as written (with
--help)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest
from invoke.collection import Collection

from tests.helpers.bite import each

ROOT = Path(__file__).resolve().parents[1]


@cache
def _collection() -> Collection:
    sys.path.insert(0, str(ROOT))
    try:
        import tasks
    finally:
        sys.path.remove(str(ROOT))
    return Collection.from_module(tasks)


def _flags() -> dict[str, dict[str, set[str]]]:
    """task -> long option -> its names (long and short), as invoke parses them."""
    out: dict[str, dict[str, set[str]]] = {}
    collection = _collection()
    for name in collection.task_names:
        task = collection[name]
        out[name] = {arg.name: set(arg.names) for arg in task.get_arguments()}
    return out


def _invoke(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_every_task_follows_one_flag_convention() -> None:
    """-p is --product wherever it exists, -h is never a task's (it is help), and an option has
    the same short flag in every task that takes it."""
    short_of: dict[str, set[frozenset[str]]] = defaultdict(set)
    for task, options in _flags().items():
        for option, names in options.items():
            shorts = frozenset(n for n in names if len(n) == 1)
            short_of[option].add(shorts)
            assert "h" not in shorts, f"invoke {task}: -h is --{option}, not help"
            if option == "product":
                assert shorts == {"p"}, f"invoke {task}: --product has {sorted(shorts)}"
            else:
                assert "p" not in shorts, f"invoke {task}: -p is --{option}, not --product"
    mixed = {o: s for o, s in short_of.items() if len(s) > 1}
    assert mixed == {}, f"options with different short flags in different tasks: {mixed}"
    assert all("product" in _flags()[t] for t in ("build", "verify", "audit", "package", "fetch"))


def test_help_is_never_taken_as_a_value() -> None:
    """`invoke TASK --help` prints help for every task: a positional argument would take
    `--help` as its value instead (`invoke cache-export --help` exported the cache to ./--help)."""
    from invoke.exceptions import ParseError
    from invoke.parser import Parser

    parser = Parser(contexts=_collection().to_contexts())
    for task in each(_collection().task_names, "tasks"):
        try:  # without invoke's core flags, a --help no task argument takes is refused
            parsed = parser.parse_argv([task, "--help"])
        except ParseError:
            continue
        values = {name: arg.value for ctx in parsed for name, arg in ctx.args.items()}
        assert "--help" not in values.values(), f"invoke {task} --help: {values}"


@pytest.mark.parametrize("task", ["pin", "verify", "build"])
def test_dash_h_is_help(task: str) -> None:
    done = _invoke(task, "-h")
    assert done.returncode == 0, done.stderr
    assert f"Usage: inv[oke] [--core-opts] {task}" in done.stdout


@pytest.mark.parametrize("args", [["pin"], ["cache-export"], ["release"]])
def test_a_usage_error_exits_2(args: list[str]) -> None:
    """A missing option is a usage error (exit 2), said before anything runs."""
    done = _invoke(*args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "usage error" in done.stderr


# --- the commands the README and docs/ show -------------------------------------------------

_COMMAND = re.compile(r"\binvoke\s+([a-z][a-z-]*)([^`\n]*)")
_FLAG = re.compile(r"(?<![\w/<-])(--?[A-Za-z][\w-]*)")


def readme_commands(text: str) -> list[tuple[str, list[str]]]:
    """Every `invoke TASK …` of a page's code spans and fenced blocks, with the flags it
    shows (`[--product P]`, `-c COMPONENT`, `--channel arch|flatpak`)."""
    snippets = re.findall(r"```[^\n]*\n(.*?)```", text, re.DOTALL)
    snippets += re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.DOTALL))
    commands = []
    for snippet in snippets:
        for part in re.split(r"&&|;|\n", snippet):
            for task, rest in _COMMAND.findall(part):
                commands.append((task, _shown_flags(rest.split(" invoke ")[0])))
    return commands


def _shown_flags(rest: str) -> list[str]:
    """The flags a command shows; a bare placeholder (`invoke pin COMPONENT`) is reported as
    "<positional>", which only a task taking a positional argument accepts."""
    flags: list[str] = []
    after_flag = False
    for token in re.sub(r"[\[\]]", " ", rest).split():
        if _FLAG.fullmatch(token):
            flags.append(token)
            after_flag = True
        elif re.fullmatch(r"[A-Z][A-Z_]+", token) and not after_flag:
            flags.append("<positional>")
        else:
            after_flag = False
    return flags


def test_the_readme_parser_finds_its_commands() -> None:
    """The parser this rests on finds what it must (else the test below checks nothing)."""
    sample = (
        "| `invoke build [--product P] [--target T …]` | x |\n"
        "```sh\npython3 -m pip install -r requirements-dev.txt && invoke build\n```\n"
        "`invoke pin -c COMPONENT [--check]`\n"
        "`invoke pin COMPONENT`, `invoke release --from DIR [--from DIR …]`\n"
    )
    assert readme_commands(sample) == [
        ("build", []),
        ("build", ["--product", "--target"]),
        ("pin", ["-c", "--check"]),
        ("pin", ["<positional>"]),
        ("release", ["--from", "--from"]),
    ]


def documented_pages() -> list[Path]:
    """The pages a reader runs commands from: the README and everything under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_documented_command_runs_as_written() -> None:
    """Each task the README or a page of docs/ names exists and answers --help; each flag it
    shows is one of the task's options (so `invoke pin COMPONENT`-style drift is caught)."""
    shown_in = {
        page.relative_to(ROOT).as_posix(): readme_commands(page.read_text("utf-8"))
        for page in each(documented_pages(), "documented pages")
    }
    # the README's first run: the main job and the tests
    assert {"build", "test"} <= {task for task, _ in shown_in["README.md"]}
    flags = _flags()
    commands = [(page, task, shown) for page, cmds in shown_in.items() for task, shown in cmds]
    tasks = sorted({task for _, task, _ in commands})
    assert {"build", "verify", "pin", "audit", "test"} <= set(tasks)
    for page, task, shown in commands:
        assert task in flags, f"{page} shows `invoke {task}`, which is no task"
        known = {("--" if len(n) > 1 else "-") + n for names in flags[task].values() for n in names}
        known |= {"-h", "--help"}  # invoke's own, after any task
        if _collection()[task].positional:
            known.add("<positional>")
        unknown = [f for f in shown if f not in known]
        assert unknown == [], f"{page} shows `invoke {task}` with {unknown}"
    test_help_is_never_taken_as_a_value()  # else --help below could run a task for real
    for task in tasks:
        done = _invoke(task, "--help")
        assert done.returncode == 0, f"invoke {task} --help: {done.stderr}"


def test_a_reader_that_stops_early_ends_the_task_quietly() -> None:
    """`invoke templates --list | head -1`: the pipe closes under the task, which ends as git
    does there (SIGPIPE's status), with no traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write the task makes fails: the reader has gone
    try:
        done = subprocess.run(
            [sys.executable, "-m", "invoke", "templates", "--list"],
            cwd=ROOT,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 128 + signal.SIGPIPE, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_invoke_test_without_its_plugins_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without pytest-xdist, pytest would answer with a usage error about `-n`: say the fix."""
    from invoke.context import Context
    from invoke.exceptions import Exit

    _collection()
    import tasks

    monkeypatch.setattr(tasks, "TEST_PLUGINS", (("xdist_is_not_here", "pytest-xdist"),))
    with pytest.raises(Exit) as raised:
        tasks.test.body(Context())
    assert raised.value.code == 2
    assert str(raised.value.message) == (
        "invoke test needs pytest-xdist: python3 -m pip install -r requirements-dev.txt"
    )
