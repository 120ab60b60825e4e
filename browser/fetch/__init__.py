"""Safe HTTP fetching for the live web: the one way our code reaches an outside address.

``SafeFetcher(FetchSettings(...)).fetch(url)`` returns a ``FetchResult`` or raises ``FetchRefused`` with a
reason code and a message a person can read; ``refusal_counts()`` tells how often each reason came up.
The policy is in docs/fetching.md.
"""

from browser.fetch.fetcher import FetchResult, FetchSettings, SafeFetcher
from browser.fetch.refusals import FetchRefused, refusal_counts

__all__ = ["FetchRefused", "FetchResult", "FetchSettings", "SafeFetcher", "refusal_counts"]
