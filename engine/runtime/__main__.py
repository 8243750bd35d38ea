"""``python -m engine.runtime run DAG.json --checkpoint DIR`` (until ``engine`` wires it)."""

import sys

from engine.runtime.cli import main_run

if __name__ == "__main__":
    argv = sys.argv[1:]
    if argv and argv[0] == "run":
        argv = argv[1:]
    sys.exit(main_run(argv))
