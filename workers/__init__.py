"""The processes: the Celery app, the HTTP enqueue API, the dev stack and the demo."""
