"""Bridges to other frameworks. Each submodule imports its framework itself, so
``import tensorcode`` (and this package) never does: ``tensorcode.interop.torch`` needs
PyTorch installed and says so when it is not."""
