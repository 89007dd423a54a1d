"""A made-up vocabulary for testing the embedded model's choices at one step: its tokens' texts, and logits that
give chosen tokens chosen probabilities (the real model's steps: tests/test_local_model.py)."""
import math


class Vocabulary:
    """Tokens numbered in the order given; past them, 60 tokens of no JSON pad the logits, so that the choices'
    look at the likeliest candidates sees some that are not the test's."""

    def __init__(self, texts: list[str]):
        self.texts = texts
        self.token = {text: number for number, text in enumerate(texts)}
        self.every = range(len(texts)).__contains__  # a grammar that allows every token

    def piece(self, token: int) -> str:
        return self.texts[token] if token < len(self.texts) else "\u00b7"

    def logits(self, probabilities: dict[str, float]):
        import numpy as np

        values = np.full(len(self.texts) + 60, -30.0, dtype=np.single)
        for text, probability in probabilities.items():
            values[self.token[text]] = math.log(probability)
        return values


def fed(*texts: str):
    """A JsonTrail that has followed these texts of a completion, in order."""
    from agent.models.local_json import JsonTrail

    trail = JsonTrail()
    for text in texts:
        trail.feed(text)
    return trail
