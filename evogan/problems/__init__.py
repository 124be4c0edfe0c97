"""What is evolved and how it is scored: regressor weights (``regressor``), the single-island
run (``regressor_evolve``), the island-model run (``regressor_islands``) and their reports
(``regressor_report``)."""
