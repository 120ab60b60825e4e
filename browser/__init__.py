"""The text-based browsing environment (engine, search backends, corpora) and its Django side."""
