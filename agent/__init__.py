"""A prompt-protocol agent: one auditable loop for any OpenAI-compatible chat model.

    from agent import Agent
    from agent.models.openai_compatible import OpenAIModel
    from agent.tools import builtin_registry

    result = Agent(OpenAIModel("gpt-4o-mini"), builtin_registry(".")).run("What is 2**64?")
"""
from importlib import import_module

_HOMES = {"Agent": "agent.loop", "RunResult": "agent.loop", "Settings": "agent.config",
          "Model": "agent.models", "ModelError": "agent.models", "Reply": "agent.models",
          "ScriptedModel": "agent.models", "NativeProtocol": "agent.protocols", "PromptProtocol": "agent.protocols"}

__all__ = list(_HOMES)


def __getattr__(name: str):
    """Imported on first use, so that `agent` on the command line starts fast (and Ctrl-C there is clean)."""
    if name not in _HOMES:
        raise AttributeError(f"module 'agent' has no attribute {name!r}")
    return getattr(import_module(_HOMES[name]), name)
