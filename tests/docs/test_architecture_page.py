"""docs/architecture.md names every part of the package: its tree has an entry for each
package folder of ``uid_fields/`` (a folder nested in another is indented under it), and
each module of a package is named in that package's entry, as a word of its text or as
an entry of its own (``cli.py``). A module added, moved or renamed without the page
fails here, so the page stays a true map.

Only Django's own folders are left out: ``migrations/`` (the files Django writes) and
``__init__.py`` of a package (the package's entry is about it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "uid_fields"
#: Folders whose modules are no design of ours to describe.
UNDESCRIBED = {"django/migrations"}
#: An entry's name starts within this many columns; continuation lines start further in.
ENTRY_COLUMN = 12


@dataclass
class Entry:
    path: str  # relative to uid_fields/, "django/query/" or "cli.py"
    text: str = ""
    entries: list[str] = field(default_factory=list)  # names of the entries under it


def tree_block(page: str) -> list[str]:
    """The lines of the page's code block that starts with ``uid_fields/``."""
    for block in re.findall(r"```[^\n]*\n(.*?)```", page, flags=re.S):
        lines = block.splitlines()
        if lines and lines[0].strip() == "uid_fields/":
            return lines[1:]
    raise AssertionError("docs/architecture.md has no tree block starting with uid_fields/")


def read_tree(lines: list[str]) -> dict[str, Entry]:
    """Each entry of the tree by its path; a folder's path ends with ``/``."""
    entries: dict[str, Entry] = {"": Entry("")}
    stack: list[tuple[int, str]] = []  # (indent, path) of the folders above the line
    last = entries[""]
    for line in lines:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        name, _, rest = line.strip().partition(" ")
        is_entry = indent < ENTRY_COLUMN and (
            name.endswith("/") or name.rstrip(",").endswith(".py")
        )
        if not is_entry:
            last.text += " " + line.strip()
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else ""
        path = parent + name.rstrip(",")
        last = entries.setdefault(path, Entry(path))
        last.text += " " + rest.strip()
        entries[parent].entries.append(name.rstrip(","))
        if name.endswith("/"):
            stack.append((indent, path))
    return entries


def missing_names(page: str, package: Path = PACKAGE) -> list[str]:
    """What the tree leaves out: package folders without an entry, and modules not named
    in their package's entry, as paths relative to ``uid_fields/``."""
    entries = read_tree(tree_block(page))
    missing = []
    folders = sorted(p.parent for p in package.rglob("__init__.py") if "__pycache__" not in p.parts)
    for folder in folders:
        relative = folder.relative_to(package).as_posix()
        if relative in UNDESCRIBED:
            continue
        key = "" if relative == "." else relative + "/"
        entry = entries.get(key)
        if entry is None:
            missing.append(key)
            continue
        for module in sorted(folder.glob("*.py")):
            if module.name == "__init__.py":
                continue
            named = module.name in entry.entries or re.search(
                rf"(?<![\w.]){re.escape(module.stem)}(?![\w])", entry.text
            )
            if not named:
                missing.append(key + module.name)
    return missing


def test_every_package_and_module_is_on_the_architecture_page() -> None:
    missing = missing_names(PAGE.read_text(encoding="utf-8"))
    assert not missing, (
        "docs/architecture.md does not name these parts of uid_fields/ in its tree "
        "(a folder needs an entry; a module, a word in its folder's entry):\n  "
        + "\n  ".join(missing)
    )


def test_the_rule_sees_a_name_removed(tmp_path: Path) -> None:
    """A small package and page: every name present passes; a module or folder taken
    out of the page is reported, and a name inside a longer one does not count."""
    for name in (
        "__init__.py",
        "cli.py",
        "ids/__init__.py",
        "ids/layouts.py",
        "ids/layouts_more.py",
        "ids/leases/__init__.py",
        "ids/leases/redis.py",
    ):
        (tmp_path / "uid_fields" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "uid_fields" / name).write_text("")
    page = (
        "```\nuid_fields/\n"
        "  cli.py        the command line\n"
        "  ids/          identifiers (layouts, layouts_more)\n"
        "    leases/     leases held in Redis\n"
        "                (redis)\n"
        "```\n"
    )
    assert missing_names(page, tmp_path / "uid_fields") == []
    assert missing_names(
        page.replace("(layouts, layouts_more)", "(layouts_more)"), tmp_path / "uid_fields"
    ) == ["ids/layouts.py"]
    without_cli = page.replace("  cli.py        the command line\n", "")
    assert missing_names(without_cli, tmp_path / "uid_fields") == ["cli.py"]
    without_leases = page.replace("    leases/     leases held in Redis\n", "")
    assert missing_names(without_leases, tmp_path / "uid_fields") == ["ids/leases/"]
