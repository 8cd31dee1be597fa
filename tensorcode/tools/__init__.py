"""Owned tools: models that own their parameters and train on their own objective.

``Tool`` is the base class (config, operations, objective, training modes,
``save_pretrained`` / ``from_pretrained``); ``Decision`` chooses among supplied
hypotheses, ``Scene`` matches an observation to supplied descriptions and ``Planner``
predicts and ranks candidates' outcomes; ``Chatbot`` is a small character-level
transformer that replies in a conversation kept in a ``ChatSession``. Train any of them with
``tensorcode.training.Trainer.from_tool(tool)``.
"""

from .base import ConfigError, Tool
from .chatbot import Chatbot, ChatSession, VocabularyError
from .decision import Decided, Decision
from .episodic import EpisodicEncoder, EpisodicIndex
from .investigator import Investigator, Verified
from .planner import Planner, Ranked
from .scene import Matched, Scene
from .scorer import PairScorer

__all__ = ["Tool", "ConfigError", "Decision", "Decided", "Scene", "Matched", "Planner",
           "Ranked", "PairScorer", "Investigator", "Verified", "EpisodicIndex",
           "EpisodicEncoder", "Chatbot", "ChatSession", "VocabularyError"]
