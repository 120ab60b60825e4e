"""The platform every app builds on: jobs, storage, permissions, inputs and parsers, charts, progress,
sessions, the embedded broker, logs. It imports no other app of the project (scripts/check_imports.py)."""
