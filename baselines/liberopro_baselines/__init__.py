"""A small visuomotor policy for LIBERO-Pro2.0, trained on CPU by behaviour cloning with action
chunking from our own demonstrations (``liberopro demos collect``; docs/baselines.md).

Two halves with different dependencies:

* training (``liberopro_baselines.data``, ``.model``, ``.train``): the ``train`` extra (JAX,
  flax, optax, pyarrow, imageio-ffmpeg, OpenCV, matplotlib);
* serving (``liberopro_baselines.serving`` with ``.numpy_net``, ``.checkpoint``, ``.tokens``):
  numpy and the submission SDK only; the network's forward pass is re-implemented in numpy from
  the exported weights, so the policy image carries no JAX (checked by lint-imports).
"""
