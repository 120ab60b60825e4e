"""The text-based browser: plain Python, no Django. See ``browser.engine.browser.Browser``."""
