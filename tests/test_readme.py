"""The README tells the truth and is the front door: short, every relative link resolves, the demo's sizes and
settings are the demo card's wherever they are stated, the commands are spelled `clbench`, and the test commands
are `make test` (the fast tier) and `make test-all` (what CI runs)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from conftest import ROOT

README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
MAX_README_LINES = 250
COMMANDS = "run|report|results|status|evaluate|plot|list|doctor"


def demo_card() -> dict:
    return yaml.safe_load((ROOT / "datasets" / "demo.yaml").read_text(encoding="utf-8"))


def test_readme_is_a_front_door_of_at_most_250_lines():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines: move reference material to docs/"


def test_install_starts_in_a_virtual_environment_and_names_the_clbench_folder_trap():
    """A first hour's friction (issue 56): the install section says how to make a virtual environment, and that a
    folder named clbench beside one's own scripts hides the module."""
    install = README.read_text(encoding="utf-8").split("## Install", 1)[1].split("\n## ", 1)[0]
    assert "python -m venv .venv" in install and ". .venv/bin/activate" in install
    assert "folder named `clbench`" in install


def test_every_relative_link_resolves():
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            path = target.split("#", 1)[0]
            if re.match(r"[a-z]+:", target) or not path:
                continue
            if not (page.parent / path).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken


def test_readme_links_nothing_outside_the_repository():
    assert not re.findall(r"\]\((?:https?|ftp):", README.read_text(encoding="utf-8"))


def test_the_demo_set_is_described_as_its_card_says():
    card = demo_card()
    sizes, defaults = card["sizes"], card["defaults"]
    text = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    stated = re.findall(r"(\d+) train(?:ing texts)?,\s+(\d+) test(?: texts)?,\s+(\d+) epochs", text)
    assert stated, "the README no longer states the demo's sizes"
    assert {tuple(map(int, s)) for s in stated} == {(sizes["train"], sizes["test"], defaults["epochs"])}
    rows = re.findall(r"^\| demo \| \d+ \| (\d+) / - / (\d+)", text, re.M)
    assert rows and {tuple(map(int, r)) for r in rows} == {(sizes["train"], sizes["test"])}
    readme = " ".join(README.read_text(encoding="utf-8").split())  # line breaks as spaces
    assert f"batch {defaults['batch_size']}" in readme and f"max length {defaults['max_length']}" in readme
    assert f"CheckList on {card['eval_defaults']['checklist_n']} texts" in readme


def test_commands_are_spelled_clbench():
    """`bench` is also frappe-bench's command: the pages name the commands `clbench` (`python -m benchmarks`
    is a module, not the command)."""
    old = re.compile(rf"(?<![\w./$-])(?<!-m )bench ({COMMANDS})\b")
    found = [f"{page.relative_to(ROOT)}:{i}" for page in PAGES
             for i, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1) if old.search(line)]
    assert not found


def test_the_test_commands_are_make_test_and_make_test_all_which_ci_runs():
    readme = README.read_text(encoding="utf-8")
    section = readme.split("## Tests", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"```bash\nmake test\b", section) and re.search(r"\nmake test-all\b", section)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert ci.rstrip().endswith("make test-all")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    fast = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert '-m "not slow and not slurm"' in fast  # the fast tier leaves out the marked tests
