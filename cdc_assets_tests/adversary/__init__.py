"""A seeded adversary: random schemas, values, workloads and faults from one seed, checked by an oracle
(`python -m cdc_assets_tests.adversary --help`; docs/architecture/testing.md)."""
