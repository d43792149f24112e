"""Peers on the same footing: mem0 and LangMem run through their own APIs on our backbone, scored by our eval.

See README.md here; `python -m benchmarks.peers --help`.
"""
