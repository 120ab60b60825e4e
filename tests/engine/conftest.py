import pytest

from browser.engine.browser import Browser
from browser.engine.settings import BrowserSettings
from tests.engine.fakes import MemoryBackend, sample_documents


@pytest.fixture
def backend() -> MemoryBackend:
    return MemoryBackend(sample_documents())


@pytest.fixture
def browser(backend) -> Browser:
    browser = Browser(backend, BrowserSettings(window_lines=5))
    browser.reset("What is pollen made of?")
    return browser
