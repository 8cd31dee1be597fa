"""Authors for distillation: the ``Model`` protocol, an OpenAI-compatible HTTP client and
a replay of recorded replies. Nothing here imports the compiler."""

from .model import Model, ModelError, ModelRequest, as_author, ask
from .openai_compatible import OpenAICompatibleModel
from .recorded import RecordedModel, load_replies, save_replies

__all__ = ["Model", "ModelRequest", "ModelError", "OpenAICompatibleModel", "RecordedModel",
           "as_author", "ask", "load_replies", "save_replies"]
