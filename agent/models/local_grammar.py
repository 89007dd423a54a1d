"""The embedded model's constrained decoding: a JSON Schema as a llama.cpp grammar, and the way it is applied.

llama.cpp's grammar sampler checks every candidate of the vocabulary (152k for Qwen 2.5) against the grammar at
each token, which made a constrained token cost 40% more than a free one. Greedy decoding needs less: the most
likely token is taken when the grammar allows it, and only when it does not are all candidates filtered. That is
how llama.cpp's own server samples with a grammar, and greedy decoding gives the same tokens either way.
"""
from __future__ import annotations

import ctypes
import json
import math
from functools import lru_cache

from agent.models import ModelError
from agent.models.local_choice import SideChoice
from agent.models.local_closing import ObjectClosing
from agent.models.local_copy import ValueCopy
from agent.models.local_json import JsonTrail
from agent.models.local_named import allowed_values, named, tool_names
from agent.models.local_quote import AnswerQuote
from agent.models.local_tool import ToolChoice

ANY_CHAR = r'char ::= [^"\\]'
JSON_CHAR = r'char ::= [^"\\\x7F\x00-\x1F]'  # JSON strings hold no raw control characters


MAX_KEPT_SCHEMA = 100_000  # characters of a schema whose grammar is kept for the next call (agent serve's
# clients send schemas up to a few MB: those are converted each time, so 32 of them cannot stay in memory)


def gbnf(schema: str) -> str:
    """The grammar of the JSON Schema ``schema`` (JSON text); llama-cpp-python would fall back to plain JSON on a
    schema it cannot convert, here that is an error."""
    return _grammar(schema) if len(schema) > MAX_KEPT_SCHEMA else _kept_grammar(schema)


def _grammar(schema: str) -> str:
    try:
        converter = _converter()
        converter.visit(converter.resolve_refs(json.loads(schema), "stdin"), "")
        return converter.format_grammar().replace(ANY_CHAR, JSON_CHAR)
    except Exception as error:
        raise ModelError(f"the local model cannot constrain replies by this JSON Schema ({error}); "
                         "drop --constrain") from error


_kept_grammar = lru_cache(maxsize=32)(_grammar)


def _converter():
    """llama-cpp-python's schema converter, where a string enum takes any string: the model writes the value it
    means and the parser's re-ask names the allowed value it most likely meant. Held to the allowed values, a
    model writing "miles" for "mi" could only stop at "m", and one asked about litres with only a length tool
    had to pick a length unit and made a call no one asked for; free, it writes "l", is re-asked, and says
    that no tool converts volumes."""
    from llama_cpp.llama_grammar import PRIMITIVE_RULES, RESERVED_NAMES, SchemaConverter

    class Converter(SchemaConverter):
        def visit(self, schema, name):
            values = schema.get("enum") if isinstance(schema, dict) else None
            if not (isinstance(values, list) and values and all(isinstance(v, str) for v in values)):
                return super().visit(schema, name)
            char = self._add_primitive("char", PRIMITIVE_RULES["char"])
            rule_name = name + "-" if name in RESERVED_NAMES else name or "root"
            return self._add_rule(rule_name, f'"\\"" {char}* "\\""')

    return Converter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)


def sampling(grammar: str, temperature: float, llama, messages: list[dict] | None = None,
             schema: object = None, opening: str = "") -> dict:
    """llama-cpp-python arguments that hold a completion to ``grammar``: checked greedy choices at temperature 0,
    llama.cpp's grammar sampler otherwise (sampling needs every allowed candidate's probability). The
    conversation's ``messages`` and the ``schema`` the grammar is of guide the choices inside a call; a greedy
    completion is made to start with the text ``opening`` (as far as the grammar allows it)."""
    if temperature > 0:
        from llama_cpp.llama_grammar import LlamaGrammar

        return {"grammar": LlamaGrammar.from_string(grammar)}
    from llama_cpp import LogitsProcessorList

    return {"logits_processor": LogitsProcessorList([CheckedGreedy(llama, grammar, messages or [], schema, opening)])}


class CheckedGreedy:
    """A llama-cpp-python logits processor for greedy decoding under a grammar: leaves the logits alone when the
    grammar allows the most likely token, else rules out every token the grammar does not allow; where an
    action's opening settles between the final answer and a call, the side is taken by its probability
    (agent.models.local_choice); in a call, the tool whose spellings together are likelier than the likeliest
    token's is named (agent.models.local_tool), a likely continuation is taken over closing the arguments before
    an optional parameter the conversation names (agent.models.local_closing), and over the likeliest token a
    likely one that keeps a string value a copy of the conversation's words (agent.models.local_copy); in a final
    answer, a quotation mark is written escaped where it would end the answer (agent.models.local_quote). Given
    an ``opening``, it takes that text's tokens first, while the grammar allows them (agent.models.local_batch).
    It follows the completion through the tokens it is shown, so one processor serves one completion."""

    def __init__(self, llama, grammar: str, messages: list[dict] | None = None, schema: object = None,
                 opening: str = ""):
        import llama_cpp

        self.lib = llama_cpp
        vocab = llama_cpp.llama_model_get_vocab(llama.model)
        self.sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
        if not self.sampler:
            raise ModelError("llama.cpp could not read the grammar for this schema; drop --constrain")
        self.seen: int | None = None  # tokens of the prompt and the completion the grammar has accounted for
        self.start = 0  # tokens of the prompt
        self.opening = llama.tokenize(opening.encode(), add_bos=False, special=False) if opening else []
        self.one = (llama_cpp.llama_token_data * 1)()
        user = named(schema, messages or [])
        self.choice = SideChoice(_pieces(llama), tool_named=user.tool_named)
        self.trail = JsonTrail()  # where the completion is in its JSON
        self.tool = ToolChoice(self.choice.piece, tool_names(schema), self.trail)
        self.closing = ObjectClosing(self.choice.piece, user.parameters, self.trail)
        self.copy = ValueCopy(self.choice.piece, user.text, self.trail, allowed_values(schema))
        self.quote = AnswerQuote(self.choice.piece, _one_token(llama), self.trail)

    def __call__(self, input_ids, logits):
        if self.seen is None:
            self.seen = self.start = len(input_ids)  # the first call sees the prompt alone
        for token in input_ids[self.seen:]:
            self.lib.llama_sampler_accept(self.sampler, int(token))
            if not self.choice.settled:
                self.choice.seen(int(token))
            self.trail.feed(self.choice.piece(int(token)))
        self.seen = len(input_ids)
        if (step := self.seen - self.start) < len(self.opening):
            if self._allows(token := self.opening[step]):
                logits[token] = logits.max() + 1.0
                return logits
            self.opening = []  # the grammar leaves the opening: the completion goes on as it would
        if not self.choice.settled and (chosen := self.choice.choose(logits, self._allows)) is not None:
            logits[chosen] = logits.max() + 1.0  # the grammar allows it
            return logits
        for chooser in (self.tool, self.closing, self.copy, self.quote):
            if (taken := chooser.choose(logits, self._allows)) is not None:
                logits[taken] = logits.max() + 1.0  # the grammar allows it
                return logits
        if self._allows(int(logits.argmax())):
            return logits
        return self._filtered(logits)

    def _allows(self, token: int) -> bool:
        self.one[0].id, self.one[0].logit, self.one[0].p = token, 0.0, 0.0
        self._apply(self.one, 1)
        return not math.isinf(self.one[0].logit)

    def _filtered(self, logits):
        import numpy as np

        token_data = np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)
        data: np.ndarray = np.zeros(len(logits), dtype=token_data)  # llama_token_data, one per candidate
        data["id"], data["logit"] = np.arange(len(logits)), logits
        self._apply(data.ctypes.data_as(self.lib.llama_token_data_p), len(logits))
        logits[data["id"]] = data["logit"]  # the grammar sets the logit of a token it rules out to -inf, in place
        return logits

    def _apply(self, data, size: int) -> None:
        candidates = self.lib.llama_token_data_array(data=ctypes.cast(data, self.lib.llama_token_data_p), size=size,
                                                     selected=-1, sorted=False)
        self.lib.llama_sampler_apply(self.sampler, ctypes.byref(candidates))

    def __del__(self):
        if getattr(self, "sampler", None):
            self.lib.llama_sampler_free(self.sampler)
            self.sampler = None


def _pieces(llama):
    """A token's text, by its id; kept for the processor's one completion, whose steps before the side settles
    look at many of the same candidates."""
    @lru_cache(maxsize=4096)
    def piece(token: int) -> str:
        return llama.detokenize([token]).decode("utf-8", "replace")
    return piece


def _one_token(llama):
    """The token whose text is the given text, or None where the vocabulary writes it with several."""
    @lru_cache(maxsize=64)
    def token(text: str) -> int | None:
        tokens = llama.tokenize(text.encode(), add_bos=False, special=False)
        return tokens[0] if len(tokens) == 1 and llama.detokenize(tokens).decode("utf-8", "replace") == text else None
    return token
