"""Deprecated: ``tensorcode.interop.torch`` is now ``tensorcode.integrations.torch``
(removed in the next minor release). Importing ``tensorcode.interop.torch`` warns and
re-exports the new module's names."""
