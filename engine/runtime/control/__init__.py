"""Commands to a running job: the per-run control channel, the listener that drains it, the
run's configuration and how a command changes it, and the outbox of acknowledgements. No
Spark here."""
