"""What engines were measured to do, as the value types the blind model reads: verify-cost curves
per backend and weight kind (:mod:`.curves`), host costs per device and method and an engine's
terms (:mod:`.engines`: ``EngineTerms``, every engine's together ``Priors``). The values, each with
where it came from, are the engines' own (specbench.engines: engines/measured/); callers hand them
in, and a validation passes them without the entries fitted on what it holds out
(``Priors.without``).
"""
