"""The REST API (/api/): the same object permissions as the pages, on top of the same services."""
