"""What every room of the runtime shares with Spark: the session, the SQL parser on its JVM
and an epoch's rows between operators (a DataFrame or an Arrow table)."""
