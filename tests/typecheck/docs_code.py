"""The documentation's Python, extracted as modules for the type checkers.

The rule, for every page under docs/ and the README: its ```` ```python ```` blocks,
joined in order, are one complete program, and ``mypy --strict`` and ``pyright`` must
accept it. A block that is not part of such a program (a settings excerpt, a line
showing a call, code that needs names the page never defines) says so on its fence:
```` ```python fragment ````. Renderers read only the first word of the fence (MyST,
GitHub and PyPI all highlight it as Python).

Each page becomes ``docs_<page>.py`` with every code line at its line number in the
page, so a checker's ``docs_sqlalchemy.py:57`` is ``docs/sqlalchemy.md:57``. A page whose
code uses Django also turns off mypy's ``var-annotated`` error: django-stubs leaves
the types of Django's own fields to its mypy plugin, which reads the models of
installed apps, and a page's script installs none (pyright checks those lines in full).

    python -m tests.typecheck.docs_code OUTPUT_DIR    # writes the modules, lists them
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FRAGMENT = "fragment"
_FENCE = re.compile(r"^(`{3,}|~{3,})\s*([^\s`]*)\s*(.*)$")
_USES_DJANGO = re.compile(r"^\s*(from|import)\s+django\b", re.MULTILINE)
DJANGO_HEADER = '# mypy: disable-error-code="var-annotated"'


@dataclass
class Block:
    line: int  # line number in the page of the block's first code line
    lines: list[str]


def pages(root: Path = ROOT) -> list[Path]:
    """The pages whose code is checked: docs/**/*.md and the README."""
    return [*sorted((root / "docs").rglob("*.md")), root / "README.md"]


def checked_blocks(text: str) -> list[Block]:
    """The page's ```python blocks that are not marked ``fragment``."""
    blocks: list[Block] = []
    fence: str | None = None
    keep = False
    current: Block | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if fence is not None:
            if line.strip().startswith(fence) and line.strip().strip(fence[0]) == "":
                if keep and current is not None:
                    blocks.append(current)
                fence, current = None, None
            elif current is not None:
                current.lines.append(line)
            continue
        opening = _FENCE.match(line)
        if opening:
            fence = opening.group(1)
            words = opening.group(3).split()
            keep = opening.group(2) == "python" and FRAGMENT not in words
            current = Block(number + 1, [])
    return blocks


def module_text(text: str) -> str | None:
    """The page's checked code at its own line numbers, or None if it has none."""
    blocks = checked_blocks(text)
    if not blocks:
        return None
    out: list[str] = []
    for block in blocks:
        while len(out) < block.line - 1:
            out.append("")
        out.extend(block.lines)
    code = "\n".join(out) + "\n"
    if _USES_DJANGO.search(code):
        if out[0]:
            raise ValueError("a page's first line is its title, never code")
        code = DJANGO_HEADER + code
    return code


def module_name(page: Path, root: Path = ROOT) -> str:
    relative = page.relative_to(root).with_suffix("")
    parts = [p for p in relative.parts if p != "docs"]
    return "docs_" + "_".join(re.sub(r"\W", "_", p) for p in parts).lower()


def write_modules(out: Path, root: Path = ROOT) -> list[Path]:
    """Write one module per page that has checked code; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for page in pages(root):
        code = module_text(page.read_text(encoding="utf-8"))
        if code is None:
            continue
        path = out / f"{module_name(page, root)}.py"
        path.write_text(code, encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    for path in write_modules(Path(argv[1])):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
