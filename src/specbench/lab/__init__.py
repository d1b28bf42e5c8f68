"""Synthetic GGUF models whose greedy output is designed, so measurements have ground truth.

The target's greedy next token follows a single long cycle over printable tokens; a draft
agrees with it on a chosen fraction α of tokens. See ``docs/lab.md``. Beside the flow: it hands
``run`` and the tests model files (and their ``truth.json``) to measure, and real small models
fetched into the cache.
"""

from __future__ import annotations
