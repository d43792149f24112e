"""MRAgent's question-time pieces: the read-side store, tools, seed, protocol parsing, prompts and schemas.

graphs/mragent.py wires them into the LangGraph loop; ingestion lives in app/ingest/mragent.py.
"""
