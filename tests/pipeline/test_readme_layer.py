"""The README's memory-layer example runs as written (in a temporary folder).

It is fenced as ``py`` so the foundation test keeps finding exactly one ``python`` snippet.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_layer_example_runs(tmp_path: Path, capsys: object) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```py\n(.*?)```", readme, flags=re.S)
              if "MemoryService.create" in b]  # fmt: skip
    assert len(blocks) == 1
    previous = Path.cwd()
    os.chdir(tmp_path)
    try:
        exec(compile(blocks[0], "README.md", "exec"), {"__name__": "readme"})
    finally:
        os.chdir(previous)
    assert (tmp_path / "layer.db").exists()
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "ship the API by May" in out
