"""Inference engines behind one small seam (:class:`specbench.engines.base.Engine`)."""

from __future__ import annotations
