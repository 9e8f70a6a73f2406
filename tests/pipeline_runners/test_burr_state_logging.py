"""Burr logs every state its persister saves (``burr.core.state`` at debug: the whole chat of a
memorize). memoir's logging setup holds that logger at info even when memoir runs at debug with
library debug on. A real process: the CLI's logging setup, the Burr runner, stderr read back.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SECRET_CHAT = "my locker code is zebra-marmalade-4471"

MEMORIZE_AT_DEBUG = textwrap.dedent(
    """
    import sys
    import structlog
    from memory_core.pipeline.runners.burr_runner import BurrRunner
    from memory_core.pipeline.service import MemoryService
    from server.logging_setup import configure_logging
    from tests.pipeline.layer_kit import ALICE, CATEGORIES, OrgScope

    configure_logging("debug", library_debug=True)
    structlog.get_logger("probe").debug("memoir debug is on")
    service = MemoryService.create(
        scope_model=OrgScope, categories=CATEGORIES, embedder="hash:64",
        runner=BurrRunner(sys.argv[1]),
    )
    result = service.memorize(ALICE, conversation=[{"role": "user", "content": sys.argv[2]}])
    assert result.items_added, result
    """
)


def test_burr_saved_states_stay_out_of_the_log_at_debug(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOIR_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, "-c", MEMORIZE_AT_DEBUG, str(tmp_path / "burr"), SECRET_CHAT],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "memoir debug is on" in done.stderr
    assert "zebra-marmalade" not in done.stderr
    assert "zebra-marmalade" not in done.stdout
