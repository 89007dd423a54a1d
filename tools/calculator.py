"""A safe calculator: the expression is parsed with `ast` and walked node by node, never evaluated."""

from __future__ import annotations

import ast
import math
import operator
import re
from typing import Callable, Union

from .registry import ToolError, tool

Number = Union[int, float]

MAX_LENGTH = 500
MAX_NESTING = 50
MAX_DEPTH = 250
MAX_DIGITS = 4000  # for every integer, typed or computed; below Python's own int-to-str limit (4300 by default)
_LIMIT = 10**MAX_DIGITS  # the smallest integer with too many digits
MAX_BITS = _LIMIT.bit_length()  # an integer with more bits has too many digits

_ALLOWED = "use numbers, + - * / // % **, parentheses, math functions like sqrt(2) and the constants pi, e, tau"
_SYMBOLS = {"×": "*", "·": "*", "⋅": "*", "÷": "/", "−": "-", "–": "-", "^": "**"}
_SUPERSCRIPT = re.compile("⁻?[⁰¹²³⁴⁵⁶⁷⁸⁹]+")
_FLOAT_LITERAL = re.compile(r"(?<![\w.])(?:\d[\d_]*)?\.?\d[\d_]*(?:[eE][-+]?\d[\d_]*)?")
_ASCII_SPACES = str.maketrans("\t\n\r\x0b\x0c", "     ")
_SUPERSCRIPT_DIGITS = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")
_TOO_MANY_DIGITS = (
    f"result too large (more than {MAX_DIGITS:,} digits); for numbers this big work with logarithms, "
    "like 5000*log10(7) for log10(7**5000)"
)
_UNDERFLOW = (
    "result too small for a floating-point number: it would be rounded to 0 (the smallest is about 5e-324); "
    "rescale the numbers or work with logarithms"
)
_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau}
_NODE_NAMES = {
    ast.Compare: "a comparison",
    ast.BoolOp: "'and' / 'or'",
    ast.IfExp: "an 'if' expression",
    ast.Lambda: "a lambda",
    ast.Subscript: "indexing",
    ast.List: "a list",
    ast.Dict: "a dict",
    ast.Set: "a set",
    ast.JoinedStr: "an f-string",
    ast.NamedExpr: "an assignment",
    ast.Starred: "'*' unpacking",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a comprehension",
}
_OPERATOR_SYMBOLS = {
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.MatMult: "@",
    ast.Invert: "~",
    ast.Not: "not",
}


def _power(base: Number, exponent: Number) -> Number:
    """`base ** exponent`; an integer power far out of range is refused before it is computed."""
    if isinstance(base, int) and isinstance(exponent, int):
        if abs(base) > 1:
            digits = abs(exponent) * math.log10(abs(base)) if abs(exponent) <= MAX_BITS else math.inf
            if exponent > 0 and digits > MAX_DIGITS + 1:
                raise ToolError(_TOO_MANY_DIGITS)
            if exponent < 0 and digits > 400:  # far below the smallest float, about 5e-324
                raise ToolError(_UNDERFLOW)
        if exponent < 0:
            return 1 / base**-exponent  # correctly rounded, where float(base) ** exponent could overflow
    return base**exponent


def _factorial(n: Number) -> int:
    if isinstance(n, int) and (n > MAX_BITS or n > 1 and math.lgamma(n + 1) / math.log(10) > MAX_DIGITS + 1):
        raise ToolError(_TOO_MANY_DIGITS)
    return math.factorial(n)  # type: ignore[arg-type]  # a float is refused there, with its own message


def _round(number: Number, ndigits: Number | None = None) -> Number:
    if isinstance(ndigits, int) and abs(ndigits) > MAX_DIGITS:
        raise ToolError(f"round: ndigits must be between -{MAX_DIGITS} and {MAX_DIGITS}")
    return round(number, ndigits)  # type: ignore[arg-type]  # a float is refused there, with its own message


_BINARY: dict[type, Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _power,
}
_UNARY: dict[type, Callable[[Number], Number]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}

_NEVER_ZERO = {operator.mul, operator.truediv, _power, math.exp}  # a zero result from non-zero arguments is underflow

_ONE_ARGUMENT = (
    "sqrt sin cos tan asin acos atan sinh cosh tanh log10 log2 exp floor ceil fabs degrees radians".split()
)
_FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int | None]] = {
    **{name: (getattr(math, name), 1, 1) for name in _ONE_ARGUMENT},
    "log": (math.log, 1, 2),
    "atan2": (math.atan2, 2, 2),
    "hypot": (math.hypot, 1, None),
    "gcd": (math.gcd, 1, None),
    "abs": (abs, 1, 1),
    "round": (_round, 1, 2),
    "min": (lambda *numbers: min(numbers), 1, None),
    "max": (lambda *numbers: max(numbers), 1, None),
    "factorial": (_factorial, 1, 1),
}


def evaluate(expression: str) -> Number:
    """The exact value of an arithmetic expression; ToolError saying what is wrong otherwise."""
    if len(expression) > MAX_LENGTH:
        raise ToolError(f"expression too long ({len(expression):,} characters; the limit is {MAX_LENGTH})")
    text, origin = _normalize(expression)
    if not text:
        raise ToolError("empty expression; write something like 2*(3+4)")
    _check_nesting(text)
    try:
        tree = ast.parse(text, mode="eval")
        _check_float_literals(text)
        return _eval(tree.body, 0)
    except SyntaxError as error:
        index = min(max((error.offset or 1) - 1, 0), len(origin))
        position = origin[index] + 1 if index < len(origin) else len(expression) + 1
        raise ToolError(f"invalid expression: {error.msg} at position {position}") from None
    except ValueError as error:
        raise ToolError(f"invalid expression: {error}") from None
    except (RecursionError, MemoryError):
        raise ToolError("expression too complex; split it into smaller steps") from None


def _normalize(expression: str) -> tuple[str, list[int]]:
    """Replace typed symbols (× ÷ − ^ ²³) by Python operators; also return each character's original index."""
    if expression.isascii() and "^" not in expression:  # the common case: nothing to replace
        text = expression.translate(_ASCII_SPACES)
        start = len(text) - len(text.lstrip())
        stripped = text.strip()
        return stripped, list(range(start, start + len(stripped)))
    chars: list[str] = []
    origin: list[int] = []
    index = 0
    while index < len(expression):
        superscript = _SUPERSCRIPT.match(expression, index)
        if superscript:  # a run like ²³ or ⁻¹ is one exponent
            exponent = int(superscript.group().translate(_SUPERSCRIPT_DIGITS))  # ⁰¹ is 1
            replacement, end = f"**{exponent}", superscript.end()
        else:
            char = expression[index]
            replacement, end = " " if char.isspace() else _SYMBOLS.get(char, char), index + 1
        chars.append(replacement)
        origin.extend([index] * len(replacement))
        index = end
    text = "".join(chars)
    start = len(text) - len(text.lstrip())
    return text.strip(), origin[start : start + len(text.strip())]


def _check_nesting(text: str) -> None:
    depth = deepest = 0
    for char in text:
        if char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}":
            depth -= 1
    if deepest > MAX_NESTING:
        raise ToolError(f"expression nested too deeply (more than {MAX_NESTING} levels of parentheses)")


def _check_float_literals(text: str) -> None:
    """Refuse a literal like 1e-400 that is not zero but reads as 0.0."""
    for literal in _FLOAT_LITERAL.finditer(text):
        mantissa = literal.group().lower().partition("e")[0]
        if float(literal.group()) == 0 and any(digit in mantissa for digit in "123456789"):
            raise ToolError(_UNDERFLOW)


def _eval(node: ast.AST, depth: int) -> Number:
    if depth > MAX_DEPTH:
        raise ToolError("expression nested too deeply; split it into smaller steps")
    if isinstance(node, ast.Constant):
        return _checked(_literal(node.value))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left, depth + 1), _eval(node.right, depth + 1)
        return _apply(_BINARY[type(node.op)], left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand, depth + 1))
    if isinstance(node, ast.Name):
        return _constant(node.id)
    if isinstance(node, ast.Call):
        return _call(node, depth)
    raise ToolError(_not_allowed(node))


def _literal(value: object) -> Number:
    if isinstance(value, bool):
        raise ToolError(f"{value} is not a number; {_ALLOWED}")
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, complex):
        raise ToolError("complex numbers are not allowed")
    kind = "text in quotes" if isinstance(value, (str, bytes)) else repr(value)
    raise ToolError(f"{kind} is not allowed; {_ALLOWED}")


def _constant(name: str) -> Number:
    if name in _CONSTANTS:
        return _CONSTANTS[name]
    if name in _FUNCTIONS:
        raise ToolError(f"{name} is a function; call it like {name}(2)")
    raise ToolError(f"name {name!r} is not allowed; the constants are {', '.join(_CONSTANTS)}")


def _call(node: ast.Call, depth: int) -> Number:
    if not isinstance(node.func, ast.Name):
        raise ToolError(f"only math functions can be called, like sqrt(2); {_ALLOWED}")
    name = node.func.id
    if name not in _FUNCTIONS:
        raise ToolError(f"function {name!r} is not allowed; available functions: {', '.join(_FUNCTIONS)}")
    if node.keywords:
        raise ToolError(f"keyword arguments are not allowed in {name}(); pass numbers only, like round(2.567, 2)")
    function, fewest, most = _FUNCTIONS[name]
    args = [_eval(arg, depth + 1) for arg in node.args]
    if len(args) < fewest or (most is not None and len(args) > most):
        expected = str(fewest) if fewest == most else f"{fewest} or {most}" if most else f"at least {fewest}"
        plural = "" if expected in ("1", "at least 1") else "s"
        raise ToolError(f"{name}() takes {expected} argument{plural}, got {len(args)}")
    try:
        return _apply(function, *args)
    except ValueError as error:
        shown = ", ".join(_format(arg) for arg in args)
        raise ToolError(f"{name}({shown}) is not defined ({error})") from None
    except TypeError as error:
        raise ToolError(f"{name}(): {error}") from None


def _apply(function: Callable[..., Number], *args: Number) -> Number:
    try:
        result = _checked(function(*args))
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    except OverflowError:
        raise ToolError("result too large for a floating-point number (the limit is about 1.8e308)") from None
    if result == 0 and function in _NEVER_ZERO and all(args):
        raise ToolError(_UNDERFLOW)
    return result


def _checked(value: Number) -> Number:
    """Reject values that are not finite real numbers or are integers too large to work with."""
    if isinstance(value, complex):
        raise ToolError("the result is not a real number (e.g. a fractional power of a negative number)")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError("result too large for a floating-point number (the limit is about 1.8e308)")
    if isinstance(value, int) and abs(value) >= _LIMIT:
        raise ToolError(_TOO_MANY_DIGITS)
    return value


def _not_allowed(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"attribute access ('.{node.attr}') is not allowed; {_ALLOWED}"
    if isinstance(node, ast.Tuple):
        return (
            "a comma is only allowed between function arguments; write numbers without thousands separators "
            "(1000000) and with a dot for decimals (2.5)"
        )
    if isinstance(node, (ast.BinOp, ast.UnaryOp)):
        symbol = _OPERATOR_SYMBOLS.get(type(node.op), type(node.op).__name__)
        return f"operator '{symbol}' is not allowed; {_ALLOWED}"
    return f"{_NODE_NAMES.get(type(node), type(node).__name__)} is not allowed; {_ALLOWED}"


def _format(value: Number) -> str:
    return repr(value) if isinstance(value, float) else str(value)


@tool(
    description="Evaluate an arithmetic expression exactly, e.g. (17 + 3) * 2**5 / 4; "
    "supports + - * / // % ** and math functions like sqrt, sin, log, pi.",
    hint="Use calculator for any arithmetic; never work a result out yourself.",
    example={"task": "What is 12% of 350?", "arguments": {"expression": "350 * 12 / 100"}, "result": "42.0",
             "answer": "12% of 350 is 42."},
)
def calculator(expression: str) -> str:
    return _format(evaluate(expression))
