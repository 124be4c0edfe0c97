"""The energy regressor task: the 2D CNN and its batched evaluation of many genomes (``network``,
``fused_eval`` + ``_fused_eval.c``), weights as genomes with MAPE fitness (``problem``), the GA and
island runs (``evolve``, ``islands``), the RMSprop baseline (``rmsprop``), their reports
(``report``) and the energy resolution (``resolution``)."""
