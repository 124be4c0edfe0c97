"""The island model over MPI: one island per group of ranks, each running an engine strategy,
with migration between islands (``migration``: topologies, immigration policies), seed-compressed
genomes (``lineage``), checkpoints of an island's whole state (``state``) and the communicators,
stop agreement and resume of a run (``session``)."""
