"""What the theory knows of SGLang: no host cost or verify curve measured yet (both unknown, with
the unknown engine's bands); its EAGLE worker drafts the first token in the catch-up pass.

``forward_draft_extend_after_decode`` runs the head over the verified tokens' hidden states and
gives the first level's top-k from the last of them; ``draft`` runs the other ``num_steps − 1``
(theory/methods.py): a round runs the catch-up and γ − 1 drafting passes, not γ. Its fused
recurrent kernels read and write a hybrid model's state in place through slot indices (2 moves a
pass, 1 per snapshot: the theory's default).
"""

from __future__ import annotations

from specbench.theory.measured.engines import EngineTerms


def terms(kind: str, name: str) -> EngineTerms:
    """SGLang's terms under the registry's ``kind`` and its display ``name``."""
    return EngineTerms(kind, name, catchup_drafts=True)
