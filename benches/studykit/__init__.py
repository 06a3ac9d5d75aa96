"""The benchmark study behind docs/benchmarks.md (run it with benches/study.py): `harness`
(statistics, checks, processes and calls), `experiments` (one function per section), `report`
(the document and its plots)."""
