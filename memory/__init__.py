"""Mneme's library: models, settings, errors, the storage ports and their adapters, extraction,
embedding and recall. No Celery imports here: tasks and workers call into this package."""

from memory.errors import ConfigurationError, Conflict, InvalidInput, MnemeError, NotFound, TransientError
from memory.models import Event, EventType, Extraction, Fact, FactSource, Message, Relation, Role
from memory.settings import Settings, get_settings

__all__ = [
    "ConfigurationError", "Conflict", "Event", "EventType", "Extraction", "Fact", "FactSource", "InvalidInput",
    "Message", "MnemeError", "NotFound", "Relation", "Role", "Settings", "TransientError", "get_settings",
]
