"""The coder/judge loop, its prompts, and LLM clients. Protocols live here; implementations in modules."""

from agent.llm import ChatModel, LLMError, LLMReply, Usage

__all__ = ["ChatModel", "LLMError", "LLMReply", "Usage"]
