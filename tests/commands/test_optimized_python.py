"""`python -OO` strips docstrings, which the commands' --help texts are made from: every command still parses."""

from __future__ import annotations

import json
import subprocess
import sys

# every command's --help in one process (the imports are paid once); the commands whose help exits otherwise
HELP_OF_EVERY_COMMAND = """
import contextlib, io, json
from vanilla_transformer.cli import COMMANDS, main

failed = {}
for name in COMMANDS:
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            main([name, "--help"])
    except SystemExit as stop:
        if stop.code not in (0, None):
            failed[name] = stop.code
    except Exception as err:
        failed[name] = repr(err)
print(json.dumps(failed))
"""


def test_every_command_parses_without_docstrings():
    done = subprocess.run(
        [sys.executable, "-OO", "-c", HELP_OF_EVERY_COMMAND], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {}
