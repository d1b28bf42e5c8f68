"""Prompts to benchmark with: the bundled set, user JSONL files and public dataset formats."""

from __future__ import annotations
