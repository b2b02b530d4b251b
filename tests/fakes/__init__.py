"""Test doubles that behave like the real thing over the real interfaces: a scripted LangChain chat
model and a scripted OpenAI-compatible HTTP server."""
