"""`agent serve`: an OpenAI-compatible endpoint that gives any model tool calling through the prompt protocol.

``translate`` turns OpenAI's tool calling into the protocol and back (no HTTP); ``app`` is the web application
(starlette, the `serve` extra), imported only by the command.
"""
