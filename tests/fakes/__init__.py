"""FAKE engine servers for tests: protocol-faithful stand-ins for vLLM, SGLang and llama-server.

They reproduce the documented wire formats (from each engine's docs) —
SSE chunks, Prometheus text, server-info JSON and log lines — and nothing else. They are not
engines: every number they return is made up, consistently, so tests can assert exact values.
"""
