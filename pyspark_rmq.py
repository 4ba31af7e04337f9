"""Spark discovers Python data sources in top-level modules named pyspark_*: this one is format("rmq")."""
