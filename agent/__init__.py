"""A prompt-protocol agent: one auditable loop for any OpenAI-compatible chat model.

    from agent import Agent
    from agent.openai_model import OpenAIModel
    from tools import builtin_registry

    result = Agent(OpenAIModel("gpt-4o-mini"), builtin_registry(".")).run("What is 2**64?")
"""
from agent.loop import Agent, RunResult, Settings
from agent.model import Model, ModelError, Reply, ScriptedModel
from agent.protocols import NativeProtocol, PromptProtocol

__all__ = ["Agent", "RunResult", "Settings", "Model", "ModelError", "Reply", "ScriptedModel",
           "NativeProtocol", "PromptProtocol"]
