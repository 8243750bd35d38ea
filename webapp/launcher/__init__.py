"""The supervised process group behind ``make run``: ``python -m webapp.launcher run``.

``run_lock`` keeps a second launcher out, ``embedded_services`` provides PostgreSQL and Redis
(and remembers which it must stop), ``children`` starts and stops the web server and the Celery
processes with prefixed output, ``health`` tells when the web server serves (for the launcher
and for the test stacks it starts), and ``__main__`` puts them together.
"""
