"""The question bank: file formats (pure), split assignment (pure) and the import service."""
