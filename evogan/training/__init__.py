"""Gradient training: the RMSprop regressor baseline (``rmsprop``), one 3DGAN step (``gan_step``,
``gan_losses``), and the data-parallel trainer over MPI (``data_parallel`` exchanges,
``gan_trainer``, ``gan_loop``, ``gan_checkpoint``, ``gan_cadence`` for stops and timers,
``gan_validation`` for validation during training)."""
