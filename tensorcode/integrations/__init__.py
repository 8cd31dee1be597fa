"""Where TensorCode meets other software.

Authors for distillation: the ``Model`` protocol, an OpenAI-compatible HTTP client and a
replay of recorded replies (this package's names; none imports the compiler). PyTorch:
``tensorcode.integrations.torch`` moves optimizer state dicts and parameter payloads
both ways; it imports PyTorch (the ``torch`` extra) and the runtime, so it loads only
when imported by name. (The PyTorch bridge was ``tensorcode.interop.torch``, which still
imports, with a ``DeprecationWarning``.)
"""

from .model import Model, ModelError, ModelRequest, as_author, ask
from .openai_compatible import OpenAICompatibleModel
from .recorded import RecordedModel, load_replies, save_replies

__all__ = ["Model", "ModelRequest", "ModelError", "OpenAICompatibleModel", "RecordedModel",
           "as_author", "ask", "load_replies", "save_replies"]
