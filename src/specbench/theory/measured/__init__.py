"""What engines were measured to do, each value with where it came from: the verify-cost curves
per engine, backend and weight kind (:mod:`.curves`) and the host costs per engine, device and
method (:mod:`.engines`). Data the blind model uses; a validation can pass tables without the
entries fitted on what it holds out (theory/spread/terms.py ``Priors``)."""
