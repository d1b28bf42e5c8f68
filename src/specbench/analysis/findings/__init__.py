"""What a reader must know before trusting a number: one module per family of finding codes.

Each family module declares its codes (a ``str``-valued enum, so findings.json holds the bare
code), each code's severity, its section of docs/checks.md and one ``check``, and ends with its
``FAMILY``. :mod:`judge` runs them in one fixed order (:data:`judge.FAMILIES`) over the evidence
:mod:`gather` computes once; :mod:`model` is the :class:`~model.Finding` itself. A new check is a
new module here and one line in ``FAMILIES``.
"""
