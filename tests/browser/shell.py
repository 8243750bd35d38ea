"""The Django shell the browser tests keep open on their stack's database, so that a test's
setup (a run created, an epoch published) does not pay a Python and Django start each time.

Each request is a line of JSON, ``{"code": ...}``; each reply a line of JSON with what the code
printed and, if it raised, the traceback."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback


def main() -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    django.setup()
    replies = sys.stdout
    for line in sys.stdin:
        printed, reply = io.StringIO(), {}
        try:
            with contextlib.redirect_stdout(printed):
                exec(json.loads(line)["code"], {"__name__": "__shell__"})
        except BaseException:  # noqa: BLE001 - SystemExit too: the test reads the cause
            reply["error"] = traceback.format_exc()
        reply["out"] = printed.getvalue()
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


if __name__ == "__main__":
    main()
