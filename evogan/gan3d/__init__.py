"""The 3DGAN task: networks built from a spec (``networks``, ``blocks``, ``shapes`` for the shape
arithmetic before allocation), self-describing generator files (``model_file``), one training step
and its losses (``step``, ``losses``), the data-parallel exchanges (``data_parallel``: sync
all-reduce, ARAR ring) and the trainer (``trainer``, ``loop``, ``checkpoint``, ``resume``,
``cadence``, ``validation`` during training)."""
