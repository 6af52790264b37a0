"""The SQL sandbox over a capture dataset: DuckDB in a worker process of its own, each query
checked against an allow-list before it runs (no files, no network, no extensions), bounded in
time, memory and rows, and its results cut to what a prompt can hold."""
