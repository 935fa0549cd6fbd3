"""Thin Celery tasks: deserialise, call ``memory``, send the next stage. Names are ``memory.<verb>``."""
