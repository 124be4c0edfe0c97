"""Networks: the 2D energy regressor (``regressor``) and 3DGAN built from a spec (``gan3d``,
``blocks``, ``gan_shapes`` for shape arithmetic before allocation, ``gan_io`` for
self-describing generator files)."""
